"""Which groups exist, what their objects last said, and which API calls to make next.

Pure bookkeeping (no kopf, no I/O): the kopf handlers feed it watch events of Leases and of
ScheduledJobGroups; :meth:`Registry.plan` returns the actions to take (status patches, object
creations, Events) and the runtime reports back what succeeded. Writes are coalesced:

* a change that matters (leader, failover, run, condition) is written at most once per group per
  ``settings.min_write_interval`` seconds, with everything that changed meanwhile;
* a change of renewal-only fields (``lastRenewTime``, ``expiryTime``, ...) waits until
  ``settings.renew_write_interval`` seconds passed since the group's last write;
* every ``settings.evaluate_interval`` seconds every group is rendered again so that time-based
  conditions (an expired Lease, a missed run) appear without any Lease changing;
* a failed status write backs off: the group's next write waits ``write_backoff_initial``
  seconds, doubling with every further failure up to ``write_backoff_max``, each delay drawn
  between half and all of that ("equal jitter", so that many groups failing at once spread out).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from k8slease.kube.microtime import parse_microtime
from k8slease.kube.validate import is_dns_subdomain
from k8slease.lease.meta import group_of, lease_name_of
from k8slease.logs import get_logger
from k8slease.names import (
    CRD_GROUP,
    CRD_KIND,
    CRD_VERSION,
    DOMAIN,
    LABEL_AUTO_CREATE,
    LABEL_GROUP,
    LABEL_ROLE,
    ROLE_LEADER,
)
from k8slease.operator.fold import GroupFold
from k8slease.operator.groupspec import GroupSpec, parse_spec
from k8slease.operator.history import Notice
from k8slease.operator.patch import merge_patch, significant
from k8slease.operator.settings import OperatorConfig
from k8slease.shown import shown

log = get_logger("k8slease.operator.groups")

#: Label and annotation on ScheduledJobGroups the operator created by itself.
LABEL_AUTO_CREATED = f"{DOMAIN}/auto-created"


Key = tuple[str, str]  # (namespace, group); the group's object has the group's name


@dataclass(frozen=True, slots=True)
class PatchStatus:
    key: Key
    patch: dict[str, Any]
    status: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CreateObject:
    key: Key
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PostEvent:
    key: Key
    involved: dict[str, str]
    notice: Notice


Action = PatchStatus | CreateObject | PostEvent


@dataclass
class GroupObject:
    """What the operator knows of one ScheduledJobGroup object."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: GroupSpec
    created: datetime | None
    #: The status as last written by us (or as found when the object was first seen).
    written: dict[str, Any] = field(default_factory=dict)
    written_at: float = float("-inf")
    #: Status writes that failed in a row, and the monotonic time before which none is tried.
    failures: int = 0
    retry_at: float = float("-inf")
    #: Labelled ``k8slease.io/auto-created=true`` (counts against the namespace's cap).
    auto_created: bool = False


def _metadata(body: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = body.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


class Registry:
    """All groups the operator follows, keyed by (namespace, group)."""

    def __init__(self, settings: OperatorConfig, *, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._rng = rng or random.Random()
        self.folds: dict[Key, GroupFold] = {}
        self.objects: dict[Key, GroupObject] = {}
        self.dirty: set[Key] = set()
        #: the group each Lease (namespace, name) was last folded into
        self._lease_groups: dict[tuple[str, str], Key] = {}
        self.creating: set[Key] = set()
        self.uncreatable: set[Key] = set()
        #: Groups auto-creation declined, with the reason last said at WARNING (said once).
        self.declined: dict[Key, str] = {}
        self._last_evaluation = float("-inf")

    # -- input ----------------------------------------------------------------------------------

    def on_lease(
        self, event_type: str | None, body: Mapping[str, Any], now: datetime
    ) -> Key | None:
        """Fold a Lease watch event; returns the group's key, or None for an unlabelled Lease.

        A Lease relabelled into another group (its ``k8slease.io/group`` label edited: the
        operator's label-selector watch reports that as a change, not a deletion) leaves the
        group it was folded into as if deleted, so that group does not keep showing its holder.
        """
        group = group_of(body)
        namespace = _metadata(body).get("namespace")
        name = lease_name_of(body)
        if not group or not isinstance(namespace, str) or not name:
            return None
        key = (namespace, group)
        left = self._lease_groups.get((namespace, name))
        if left is not None and left != key and left in self.folds:
            self.folds[left].observe(body, now, deleted=True)
            self.dirty.add(left)
        if event_type == "DELETED":
            self._lease_groups.pop((namespace, name), None)
        else:
            self._lease_groups[(namespace, name)] = key
        fold = self.folds.get(key)
        if fold is None:
            fold = self.folds[key] = GroupFold(namespace, group, first_seen=now)
            obj = self.objects.get(key)
            if obj is not None:
                fold.set_leader_lease_name(obj.spec.lease_name)
        fold.observe(body, now, deleted=event_type == "DELETED")
        self.dirty.add(key)
        return key

    def on_object(
        self, event_type: str | None, body: Mapping[str, Any], now: datetime
    ) -> Key | None:
        """Take note of a ScheduledJobGroup watch event."""
        metadata = _metadata(body)
        namespace, name = metadata.get("namespace"), metadata.get("name")
        if not isinstance(namespace, str) or not isinstance(name, str):
            return None
        key = (namespace, name)
        if event_type == "DELETED":
            self._forget(key)
            self.dirty.add(key)
            return key
        uid = str(metadata.get("uid") or "")
        generation = metadata.get("generation")
        generation = generation if isinstance(generation, int) else 0
        spec = parse_spec(body)
        created: datetime | None = None
        with contextlib.suppress(ValueError):
            created = parse_microtime(metadata.get("creationTimestamp"))
        obj = self.objects.get(key)
        self.creating.discard(key)
        if obj is not None and obj.uid != uid:
            self._forget(key)  # deleted and created again, its deletion not seen
        if obj is None or obj.uid != uid:
            status = body.get("status")
            status = dict(status) if isinstance(status, Mapping) else {}
            labels = metadata.get("labels")
            auto = isinstance(labels, Mapping) and labels.get(LABEL_AUTO_CREATED) == "true"
            obj = GroupObject(
                namespace, name, uid, generation, spec, created, written=status, auto_created=auto
            )
            self.objects[key] = obj
            fold = self.folds.get(key)
            if fold is None:
                fold = self.folds[key] = GroupFold(namespace, name, first_seen=now)
            fold.set_history_limit(spec.history_limit)
            fold.set_leader_lease_name(spec.lease_name)
            fold.seed(status)
            self.dirty.add(key)
        elif generation != obj.generation or spec != obj.spec:
            obj.generation, obj.spec = generation, spec
            self.dirty.add(key)
        return key

    def _forget(self, key: Key) -> None:
        """The group's object is gone: so is the history its status held. The next object of
        the group starts from its own (empty) status and the Leases as they are now."""
        self.objects.pop(key, None)
        fold = self.folds.get(key)
        if fold is not None:
            self.folds[key] = fold.fresh()

    # -- output ---------------------------------------------------------------------------------

    def _create_body(self, key: Key, fold: GroupFold) -> dict[str, Any] | None:
        namespace, group = key
        if not is_dns_subdomain(group):
            return None
        spec: dict[str, Any] = {}
        leaders = sorted(
            name
            for name, (view, _) in fold.leases.items()
            if view.labels.get(LABEL_ROLE) == ROLE_LEADER
        )
        if leaders and group not in leaders:
            spec["leaseName"] = leaders[0]
        return {
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
            "kind": CRD_KIND,
            "metadata": {
                "name": group,
                "namespace": namespace,
                "labels": {LABEL_AUTO_CREATED: "true", LABEL_GROUP: group},
                "annotations": {
                    LABEL_AUTO_CREATED: "created by the k8slease operator for a group with "
                    "live Leases; delete it with auto-creation turned off to stop this"
                },
            },
            "spec": spec,
        }

    def _refusal(self, key: Key, fold: GroupFold) -> str | None:
        """Why the operator declines to create ``key``'s object, or None when it may."""
        namespace, group = key
        settings = self.settings
        declared = {group, f"{namespace}/{group}", "*", f"{namespace}/*"} & set(
            settings.auto_create_groups
        )
        opted_in = any(
            view.labels.get(LABEL_AUTO_CREATE) == "true" for view, _ in fold.leases.values()
        )
        if not declared and not opted_in:
            return (
                f"the group did not opt in: label one of its Leases {LABEL_AUTO_CREATE}=true, or "
                "declare it with --auto-create-group, or create its ScheduledJobGroup yourself"
            )
        made = sum(1 for k, o in self.objects.items() if k[0] == namespace and o.auto_created)
        made += sum(1 for k in self.creating if k[0] == namespace)
        if made >= settings.auto_create_limit:
            return (
                f"namespace {namespace} already has {made} auto-created ScheduledJobGroups, the "
                f"limit (--auto-create-limit {settings.auto_create_limit})"
            )
        return None

    def _decline(self, key: Key, reason: str) -> None:
        """Say at WARNING, once per group and reason, that its object is not created."""
        if self.declined.get(key) == reason:
            return
        self.declined[key] = reason
        log.warning(
            "not creating a ScheduledJobGroup",
            namespace=key[0],
            group=shown(key[1]),
            reason=reason,
        )

    def plan(self, now: datetime, mono: float) -> list[Action]:
        """The actions due at wall time ``now`` and monotonic time ``mono``."""
        settings = self.settings
        if mono - self._last_evaluation >= settings.evaluate_interval:
            self._last_evaluation = mono
            candidates = set(self.folds) | set(self.objects)
        else:
            candidates = set(self.dirty)
        actions: list[Action] = []
        for key in sorted(candidates):
            obj = self.objects.get(key)
            fold = self.folds.get(key)
            if obj is None:
                self.dirty.discard(key)
                if (
                    fold is not None
                    and settings.auto_create
                    and key not in self.creating
                    and key not in self.uncreatable
                    and fold.has_live_leases(now, timedelta(seconds=settings.auto_create_max_age))
                ):
                    body = self._create_body(key, fold)
                    refusal = self._refusal(key, fold) if body is not None else None
                    if body is None:
                        self.uncreatable.add(key)
                    elif refusal is not None:
                        self._decline(key, refusal)
                    else:
                        self.declined.pop(key, None)
                        self.creating.add(key)
                        actions.append(CreateObject(key, body))
                if fold is not None:
                    fold.take_notices()  # nothing to attach them to
                continue
            if mono - obj.written_at < settings.min_write_interval or mono < obj.retry_at:
                continue  # stays dirty; written on a later pass
            self.dirty.discard(key)
            if fold is None:
                fold = self.folds[key] = GroupFold(key[0], key[1], first_seen=now)
                fold.set_leader_lease_name(obj.spec.lease_name)
            status = fold.render(obj.spec, now, created=obj.created, generation=obj.generation)
            changed = significant(status) != significant(obj.written)
            minor_due = mono - obj.written_at >= settings.renew_write_interval
            if changed or (minor_due and status != obj.written):
                patch = merge_patch(obj.written, status)
                if patch:
                    actions.append(PatchStatus(key, patch, status))
            involved = {
                "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
                "kind": CRD_KIND,
                "name": obj.name,
                "namespace": obj.namespace,
                "uid": obj.uid,
            }
            notices = fold.take_notices()
            for notice in notices[-settings.max_events_per_pass :]:
                actions.append(PostEvent(key, involved, notice))
        return actions

    # -- feedback -------------------------------------------------------------------------------

    def written(self, action: PatchStatus, mono: float) -> None:
        obj = self.objects.get(action.key)
        if obj is not None:
            obj.written = action.status
            obj.written_at = mono
            obj.failures, obj.retry_at = 0, float("-inf")

    def write_failed(self, action: PatchStatus, mono: float, *, gone: bool = False) -> None:
        if gone:
            self._forget(action.key)
        else:
            obj = self.objects.get(action.key)
            if obj is not None:
                obj.failures += 1
                delay = max(self.settings.min_write_interval, self.backoff(obj.failures))
                obj.retry_at = mono + delay
        self.dirty.add(action.key)

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failed writes in a row (with jitter)."""
        settings = self.settings
        ceiling = min(
            settings.write_backoff_max,
            settings.write_backoff_initial * 2 ** min(failures - 1, 32),
        )
        return float(ceiling * self._rng.uniform(0.5, 1.0))

    def create_failed(self, action: CreateObject, *, exists: bool) -> None:
        if not exists:
            self.creating.discard(action.key)
