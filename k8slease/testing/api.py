"""The verbs on resources: get, list, create, update, patch, delete, deletecollection.

Pure request logic over :class:`~.store.Store` and :class:`~.resources.Registry`, free of
HTTP. It runs on the server's event-loop thread only, and never awaits between reading an
object and committing its replacement, which is what makes resourceVersion-conditional
writes atomic: of many concurrent PUTs carrying the same resourceVersion exactly one wins.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from . import statusbody as st
from .eventviews import to_core, to_events_k8s_io
from .objectstore import Store
from .patchformats import apply_patch, deepcopy
from .resources import Registry, ResourceType, types_from_crd
from .selectors import Predicate
from .validation import (
    decode_lease_types,
    normalize_micro_times,
    prune_lease,
    prune_metadata,
    status_error_if,
    validate_core_event,
    validate_crd,
    validate_labels_and_annotations,
    validate_lease,
    validate_name,
)

JSON = dict[str, Any]
#: etcd's default ``--max-request-bytes``: no object larger than this is stored (1.5 MiB).
MAX_STORED_BYTES = 1536 * 1024
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


def now_rfc3339() -> str:
    """Current time as a ``metav1.Time`` (seconds precision, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stored_size(obj: JSON) -> int:
    """Bytes of ``obj`` as compact JSON, about what a write of it asks etcd to store (custom
    resources are stored as JSON; built-in kinds as protobuf, a little smaller). A lone
    surrogate (from a ``\\udc80`` escape) counts 3 bytes, as the U+FFFD a Go server makes of it."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def view(rt: ResourceType, obj: JSON) -> JSON:
    """The object as served at ``rt``'s version (CRD versions share storage, and so do the
    two Event APIs)."""
    if obj.get("apiVersion") == rt.api_version:
        return obj
    if rt.shared_storage == "/events":
        return to_events_k8s_io(obj)
    shown = dict(obj)
    shown["apiVersion"] = rt.api_version
    return shown


def to_storage(rt: ResourceType, obj: JSON) -> JSON:
    """The object in its stored shape (the inverse of :func:`view`)."""
    if rt.shared_storage == "/events":
        return to_core(obj)
    return obj


def _generation_relevant(obj: JSON, status_is_subresource: bool) -> JSON:
    skip = {"metadata", "kind", "apiVersion"}
    if status_is_subresource:
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


@dataclass(eq=False)
class ResourceAPI:
    """Implements each verb; raises :class:`~.status.StatusError` for every failure."""

    store: Store
    registry: Registry
    dry_run: bool = False
    strict: bool = False
    warn: bool = False
    #: Paths of fields the request body had twice (the last one counts).
    duplicates: tuple[str, ...] = ()
    #: Warnings for the response's ``Warning`` headers (``fieldValidation=Warn``).
    warnings: list[str] = field(default_factory=list, init=False)

    def variant(
        self,
        dry_run: bool = False,
        strict: bool = False,
        warn: bool = False,
        duplicates: tuple[str, ...] = (),
    ) -> ResourceAPI:
        """The same API for one request's options: ``dryRun=All`` (everything but the
        commit), ``fieldValidation=Strict`` (unknown and duplicate fields are an error) or
        ``Warn`` (the default: they are dropped, with a warning each)."""
        if not dry_run and not strict and not warn:
            return self
        return replace(self, dry_run=dry_run, strict=strict, warn=warn, duplicates=duplicates)

    def _commit(self, resource: str, event_type: str, obj: JSON) -> JSON:
        if self.dry_run:
            return obj  # a dry run never reaches etcd
        if event_type != "DELETED" and stored_size(obj) > MAX_STORED_BYTES:
            raise st.too_large()
        return self.store.commit(resource, event_type, obj)

    def _serve_crd(self, crd: JSON) -> None:
        if not self.dry_run:
            self.registry.set_crd(crd["metadata"]["name"], types_from_crd(crd))

    # --- reads -----------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        """The object, or 404."""
        obj = self.store.get(rt.key, namespace, name)
        if obj is None:
            raise st.not_found(rt.plural, rt.group, name)
        return view(rt, obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        accepts: Predicate,
        limit: int | None = None,
        token: str | None = None,
    ) -> tuple[list[JSON], JSON]:
        """Matching objects and the list's ``metadata`` (with ``continue`` when limited)."""
        rv = self.store.resource_version
        items = [view(rt, o) for o in self.store.objects(rt.key, namespace) if accepts(o)]
        if token:
            try:
                after = json.loads(base64.urlsafe_b64decode(token.encode()))
                start = (after["ns"], after["name"])
            except (ValueError, KeyError, TypeError):
                raise st.bad_request(f"invalid continue token {token!r}") from None
            items = [
                o for o in items
                if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start
            ]  # fmt: skip
        meta: JSON = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"ns": last.get("namespace", ""), "name": last["name"]}).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return items, meta

    # --- create ----------------------------------------------------------------------------

    @staticmethod
    def list_item(rt: ResourceType, obj: JSON) -> JSON:
        """An object as an item of a list: built-in lists (typed) carry no kind/apiVersion in
        their items, custom resource lists (unstructured) do."""
        if rt.custom:
            return obj
        return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}

    def create(self, rt: ResourceType, namespace: str, body: Any) -> JSON:
        """Create an object (409 AlreadyExists when taken, 422 Invalid when invalid)."""
        obj = self._object_body(rt, body, namespace)
        meta = obj["metadata"]
        if rt.namespaced:
            self._require_namespace(namespace)
        if meta.get("resourceVersion"):
            raise st.StatusError(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(10):
                meta["name"] = meta["generateName"] + "".join(random.choices(_SUFFIX_CHARS, k=5))
                if self.store.get(rt.key, namespace, meta["name"]) is None:
                    break
        for key in (*_SERVER_META, "resourceVersion", "generation"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rt.tracks_generation:
            meta["generation"] = 1
        if rt.custom and rt.status_subresource:
            obj.pop("status", None)  # create cannot set status when it is a subresource
        if rt.plural == "namespaces" and not rt.group:
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
        self._validate(rt, obj)
        if self.store.get(rt.key, namespace, meta["name"]) is not None:
            raise st.already_exists(rt.plural, rt.group, meta["name"])
        if self._is_crd(rt):
            obj["status"] = self._crd_status(obj, None)
        committed = self._commit(rt.key, "ADDED", to_storage(rt, obj))
        if self._is_crd(rt):
            self._serve_crd(committed)
        return view(rt, committed)

    # --- update / patch --------------------------------------------------------------------

    def update(
        self, rt: ResourceType, namespace: str, name: str, sub: str, body: Any
    ) -> tuple[int, JSON]:
        """PUT: replace the object (or its status); 409 Conflict on a stale resourceVersion."""
        new = self._object_body(rt, body, namespace)
        if new["metadata"].get("name") != name:
            raise st.bad_request(
                f"the name of the object ({new['metadata'].get('name')}) does not match the "
                f"name on the URL ({name})"
            )
        old = self.store.get(rt.key, namespace, name)
        if old is None:
            uid = new["metadata"].get("uid")
            if uid and rt.allow_create_on_update and not sub:
                # the real server checks a UID precondition before creating on update: a PUT
                # of an object read before it was deleted must not recreate it
                key = (
                    f"/registry/{rt.plural}/{namespace}/{name}"
                    if namespace
                    else (f"/registry/{rt.plural}/{name}")
                )
                raise st.conflict(
                    rt.plural, rt.group, name,
                    f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                    f"AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, "
                    "UID in object meta: ",
                )  # fmt: skip
            if rt.allow_create_on_update and not sub:
                new["metadata"].pop("resourceVersion", None)
                return 201, self.create(rt, namespace, new)
            raise st.not_found(rt.plural, rt.group, name)
        uid = new["metadata"].get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise st.conflict(
                rt.plural, rt.group, name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {old['metadata']['uid']}",
            )  # fmt: skip
        wanted = new["metadata"].get("resourceVersion")
        if not wanted and not rt.unconditional_update:
            raise st.invalid(rt.plural, rt.group, name, [{
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 0: must be specified for an update",
                "field": "metadata.resourceVersion",
            }])  # fmt: skip
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise st.conflict(rt.plural, rt.group, name)
        return 200, self._commit_update(rt, old, new, sub)

    def patch(
        self, rt: ResourceType, namespace: str, name: str, sub: str, content_type: str, body: Any
    ) -> JSON:
        """PATCH (merge, JSON, strategic for built-ins); a resourceVersion in it is a condition."""
        old = self.store.get(rt.key, namespace, name)
        if old is None:
            raise st.not_found(rt.plural, rt.group, name)
        patched = apply_patch(content_type, deepcopy(view(rt, old)), body, builtin=not rt.custom)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata", {}), dict):
            raise st.bad_request("the patched object is not a JSON object")
        patched.setdefault("metadata", {})
        wanted = patched["metadata"].get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise st.conflict(rt.plural, rt.group, name)
        patched["metadata"]["name"] = name
        if rt.namespaced:
            patched["metadata"]["namespace"] = namespace
        shown = json.dumps(patched, separators=(",", ":"))
        try:
            return self._commit_update(rt, old, patched, sub)
        except st.StatusError as error:
            marker = f"cannot be handled as a {rt.kind}: "
            if error.code == 400 and marker in error.message:
                raise st.patch_invalid(shown, error.message.split(marker, 1)[1]) from None
            raise

    def _commit_update(self, rt: ResourceType, old: JSON, new: JSON, sub: str) -> JSON:
        old_meta = old["metadata"]
        if sub == "status":
            result = deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            if rt.status_subresource:
                if "status" in old:
                    result["status"] = deepcopy(old["status"])
                else:
                    result.pop("status", None)
            meta = result["metadata"]
            for key in (*_SERVER_META, "generation"):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
        result["kind"] = rt.kind
        result["apiVersion"] = rt.api_version
        result["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        self._validate(rt, result)
        if rt.tracks_generation and _generation_relevant(
            result, rt.status_subresource
        ) != _generation_relevant(view(rt, old), rt.status_subresource):
            result["metadata"]["generation"] = old_meta.get("generation", 0) + 1
        if result == view(rt, old):
            return view(rt, old)  # a no-op write: no new resourceVersion, no watch event
        if self._is_crd(rt) and sub != "status":
            result["status"] = self._crd_status(result, old.get("status"))
        meta = result["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return view(rt, self._remove(rt, to_storage(rt, result)))
        committed = self._commit(rt.key, "MODIFIED", to_storage(rt, result))
        if self._is_crd(rt):
            self._serve_crd(committed)
        return view(rt, committed)

    # --- delete ----------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, options: Any) -> tuple[int, JSON]:
        """DELETE with optional preconditions; objects with finalizers are only marked."""
        old = self.store.get(rt.key, namespace, name)
        if old is None:
            raise st.not_found(rt.plural, rt.group, name)
        pre = options.get("preconditions") or {} if isinstance(options, dict) else {}
        meta = old["metadata"]
        # kube-apiserver's checks, the UID first: the same message but for the field's name
        # and what a mismatch suggests
        for key, label, maybe in (
            ("uid", "UID", "deleted and then recreated"),
            ("resourceVersion", "ResourceVersion", "modified"),
        ):
            if pre.get(key) and pre[key] != meta[key]:
                raise st.precondition_failed(
                    rt.kind, rt.group, name,
                    f"the {label} in the precondition ({pre[key]}) does not match the {label} "
                    f"in record ({meta[key]}). The object might have been {maybe}",
                )  # fmt: skip
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return 200, view(rt, old)
            marked = deepcopy(old)
            marked["metadata"]["deletionTimestamp"] = now_rfc3339()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            if rt.tracks_generation:
                marked["metadata"]["generation"] = meta.get("generation", 0) + 1
            return 200, view(rt, self._commit(rt.key, "MODIFIED", marked))
        removed = self._remove(rt, deepcopy(old))
        if rt.plural == "namespaces" and not rt.group:
            removed = deepcopy(removed)
            removed["status"] = {"phase": "Terminating"}
            removed["metadata"]["deletionTimestamp"] = now_rfc3339()
            return 200, removed
        return 200, st.success(rt.plural, rt.group, name, meta["uid"])

    def delete_collection(
        self, rt: ResourceType, namespace: str | None, accepts: Predicate
    ) -> JSON:
        """DELETE on a collection: delete every matching object; answers the deleted list."""
        deleted = []
        for obj in self.store.objects(rt.key, namespace):
            if accepts(obj):
                meta = obj["metadata"]
                _, shown = self.delete(rt, meta.get("namespace", ""), meta["name"], None)
                item = view(rt, obj) if shown.get("kind") == "Status" else shown
                deleted.append(self.list_item(rt, item))
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.store.resource_version)},
            "items": deleted,
        }

    def _remove(self, rt: ResourceType, obj: JSON) -> JSON:
        """Commit the deletion of ``obj`` and of whatever dies with it."""
        meta = obj["metadata"]
        if rt.plural == "namespaces" and not rt.group:
            for other in self.registry.all():
                if other.namespaced and other.version == self._storage_version(other):
                    for child in self.store.objects(other.key, meta["name"]):
                        self._commit(other.key, "DELETED", deepcopy(child))
        if self._is_crd(rt):
            types = self.registry.crd_types(meta["name"])
            if not self.dry_run:
                self.registry.remove_crd(meta["name"])
            if types:
                for child in self.store.objects(types[0].key):
                    self._commit(types[0].key, "DELETED", deepcopy(child))
        return self._commit(rt.key, "DELETED", obj)

    def _storage_version(self, rt: ResourceType) -> str:
        """One version per storage key, so shared storage is visited once."""
        versions = [t.version for t in self.registry.all() if t.key == rt.key]
        return versions[0]

    # --- helpers ---------------------------------------------------------------------------

    def _object_body(self, rt: ResourceType, body: Any, namespace: str) -> JSON:
        if not isinstance(body, dict):
            raise st.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                "body is not a JSON object"
            )
        kind = body.get("kind")
        if rt.custom:
            self._require_custom_type(rt, body)
        version = body.get("apiVersion")
        if not rt.custom and version and version != rt.api_version:
            raise st.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: no kind '
                f'"{rt.kind}" is registered for version "{version}" in scheme '
                '"pkg/runtime/scheme.go:111"'
            )
        if kind and kind != rt.kind:
            raise st.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"the kind of the object ({kind}) does not match {rt.kind}"
            )
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise st.bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise st.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        body["kind"] = rt.kind
        body["apiVersion"] = rt.api_version
        return body

    @staticmethod
    def _require_custom_type(rt: ResourceType, body: JSON) -> None:
        """A custom resource body names its kind and apiVersion (built-ins default them)."""
        if not body.get("kind"):
            shown = json.dumps(body)
            raise st.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): Object "
                f"'Kind' is missing in '{shown}' ({shown[:30]} ...)"
            )
        if body.get("apiVersion") != rt.api_version:
            raise st.bad_request(
                f"the API version in the data ({body.get('apiVersion') or ''}) does not match "
                f"the expected API version ({rt.api_version})"
            )

    def _require_namespace(self, namespace: str) -> None:
        if self.store.get("/namespaces", "", namespace) is None:
            raise st.not_found("namespaces", "", namespace)

    def _validate(self, rt: ResourceType, obj: JSON) -> None:
        meta = obj["metadata"]
        causes = validate_name(
            meta.get("name"), dns_label=rt.plural == "namespaces" and not rt.group
        )
        order = list(obj)
        removed: list[str] = prune_metadata(obj)
        if rt.plural == "leases":
            decode_lease_types(obj)
        normalize_micro_times(obj, group=rt.group, plural=rt.plural, kind=rt.kind)
        causes += validate_labels_and_annotations(obj)
        if rt.plural == "leases":
            removed += prune_lease(obj)
            causes += validate_lease(obj)
        elif self._is_crd(rt):
            causes += validate_crd(obj)
        elif rt.custom:
            causes += rt.validator.apply(obj, removed)
        elif rt.plural == "events" and not rt.group:
            for key, empty in (("eventTime", None), ("reportingComponent", ""),
                               ("reportingInstance", "")):  # fmt: skip
                obj.setdefault(key, empty)
            causes += validate_core_event(obj)
        top = {key: index for index, key in enumerate(order)}
        removed.sort(key=lambda path: top.get(path.split(".")[0], len(top)))
        problems = [f'duplicate field "{p}"' for p in self.duplicates]
        problems += [f'unknown field "{p}"' for p in removed]
        if problems and self.strict:
            raise st.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {', '.join(problems)}"
            )
        if self.warn:
            self.warnings = problems
        error = status_error_if(causes, rt.kind, rt.group, meta.get("name") or "")
        if error is not None:
            raise error

    @staticmethod
    def _is_crd(rt: ResourceType) -> bool:
        return rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions"

    @staticmethod
    def _crd_status(crd: JSON, old_status: JSON | None) -> JSON:
        """The status the CRD controllers would settle on: names accepted, established."""
        spec = crd["spec"]
        names = dict(spec["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", f"{names['kind']}List")
        storage = [v["name"] for v in spec.get("versions", []) if v.get("storage")]
        stored = list((old_status or {}).get("storedVersions", []))
        stored += [v for v in storage if v not in stored]
        conditions = (old_status or {}).get("conditions")
        if not conditions:
            when = now_rfc3339()
            conditions = [
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": when,
                 "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": when,
                 "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted"},
            ]  # fmt: skip
        return {"conditions": conditions, "acceptedNames": names, "storedVersions": stored}
