"""What the real API server validates for the resources we serve.

Object names (RFC 1123), Lease specs (durations, transitions, MicroTime timestamps),
CustomResourceDefinitions (names and versions), and custom resources against their CRD's
``openAPIV3Schema``: pruning of unknown fields, defaulting, then validation. Failures are
reported as lists of causes (``{"reason", "message", "field"}``) for a 422 ``Invalid``.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import jsonschema

from .statusbody import StatusError, bad_request

JSON = dict[str, Any]

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN)
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_SUBDOMAIN}')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{_LABEL}')"
)
#: Go's RFC3339Micro layout, the only MicroTime spelling the real server parses: exactly six
#: fractional digits and a ``Z`` or ``±hh:mm`` offset.
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
_MICRO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})(Z|[+-]\d{2}:\d{2})$"
)


def cause(field: str, message: str, reason: str = "FieldValueInvalid") -> JSON:
    """One ``details.causes`` entry."""
    return {"reason": reason, "message": message, "field": field}


def go_value(value: Any) -> str:
    """Render a value roughly as Go's ``%#v`` does in field errors (strings quoted)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def validate_name(name: Any, dns_label: bool = False, field: str = "metadata.name") -> list[JSON]:
    """Causes for an invalid object name (namespaces use the stricter DNS label rule)."""
    if not name:
        return [
            cause(field, "Required value: name or generateName is required", "FieldValueRequired")
        ]
    if not isinstance(name, str):
        return [cause(field, f"Invalid value: {go_value(name)}: must be a string")]
    regex, limit, message = (
        (_LABEL_RE, 63, _LABEL_MSG) if dns_label else (_SUBDOMAIN_RE, 253, _SUBDOMAIN_MSG)
    )
    if len(name) > limit:
        return [
            cause(
                field, f"Invalid value: {go_value(name)}: must be no more than {limit} characters"
            )
        ]
    if not regex.fullmatch(name):
        return [cause(field, f"Invalid value: {go_value(name)}: {message}")]
    return []


def parse_micro_time(value: str) -> datetime:
    """Parse a MicroTime exactly as Go's ``time.Parse(RFC3339Micro, ...)`` accepts it."""
    match = _MICRO_RE.match(value)
    if not match:
        raise ValueError(f'parsing time "{value}" as "{RFC3339_MICRO}": cannot parse "{value}"')
    year, month, day, hour, minute, second, micro = (int(g) for g in match.groups()[:7])
    offset = match.group(8)
    tz = UTC
    if offset != "Z":
        sign = 1 if offset[0] == "+" else -1
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError as exc:
        raise ValueError(f'parsing time "{value}": {exc}') from None


def format_micro_time(moment: datetime) -> str:
    """Serialize as the real server stores MicroTime: UTC, six digits, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: MicroTime fields by (group, plural): the path to each and its Go name in decode errors.
MICRO_TIME_FIELDS: dict[tuple[str, str], tuple[tuple[tuple[str, ...], str], ...]] = {
    ("coordination.k8s.io", "leases"): (
        (("spec", "acquireTime"), "v1.Lease.Spec: v1.LeaseSpec.AcquireTime"),
        (("spec", "renewTime"), "v1.Lease.Spec: v1.LeaseSpec.RenewTime"),
    ),
    ("", "events"): ((("eventTime",), "v1.Event.EventTime"),),
    ("events.k8s.io", "events"): ((("eventTime",), "v1.Event.EventTime"),),
}


def normalize_micro_times(obj: JSON, *, group: str, plural: str, kind: str) -> None:
    """Decode and re-encode an object's MicroTime fields (400 BadRequest when unparseable).

    The real server fails while decoding the body, before validation, hence 400 and not 422.
    """
    for path, go_name in MICRO_TIME_FIELDS.get((group, plural), ()):
        parent: Any = obj
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or parent.get(path[-1]) is None:
            continue
        value = parent[path[-1]]
        try:
            if not isinstance(value, str):
                raise ValueError(f"cannot unmarshal {type(value).__name__} into MicroTime")
            parent[path[-1]] = format_micro_time(parse_micro_time(value))
        except ValueError as exc:
            raise bad_request(
                f'{kind} in version "v1" cannot be handled as a {kind}: '
                f"{go_name}: unmarshalerDecoder: {exc}"
            ) from None


LEASE_SPEC_FIELDS = frozenset(
    {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions",
     "strategy", "preferredHolder"}
)  # fmt: skip


#: Lease spec fields the real server decodes as integers (Go int32) and as strings.
_LEASE_INTS = ("leaseDurationSeconds", "leaseTransitions")
_LEASE_STRINGS = ("holderIdentity", "strategy", "preferredHolder")


def decode_lease_types(obj: JSON) -> None:
    """400 BadRequest for a Lease spec field of the wrong JSON type: the real server fails while
    decoding the body into its Go struct, before any validation."""
    spec = obj.get("spec")
    if spec is None:
        return
    problem = None
    if not isinstance(spec, dict):
        problem = f"cannot unmarshal {_json_type(spec)} into Go struct field Lease.spec"
    else:
        for key in (*_LEASE_INTS, *_LEASE_STRINGS):
            value = spec.get(key)
            wanted = "int32" if key in _LEASE_INTS else "string"
            if value is None or _decodes_as(value, wanted):
                continue
            problem = (
                f"json: cannot unmarshal {_json_type(value)} into Go struct field "
                f"LeaseSpec.spec.{key} of type {wanted}"
            )
            break
    if problem:
        raise bad_request(f'Lease in version "v1" cannot be handled as a Lease: {problem}')


def _decodes_as(value: Any, go_type: str) -> bool:
    if go_type == "int32":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


#: The fields of ObjectMeta; any other ``metadata`` field is unknown (dropped, or refused by
#: Strict field validation).
OBJECT_META_FIELDS = frozenset(
    {"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
     "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
     "annotations", "ownerReferences", "finalizers", "managedFields"}
)  # fmt: skip


def prune_metadata(obj: JSON) -> list[str]:
    """Drop ``metadata`` fields ObjectMeta does not have; returns their paths."""
    meta = obj.get("metadata") or {}
    unknown = [key for key in meta if key not in OBJECT_META_FIELDS]
    for key in unknown:
        del meta[key]
    return [f"metadata.{key}" for key in unknown]


_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME)
_LABEL_VALUE_RE = re.compile(f"({_QUALIFIED_NAME})?")
_QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    f"used for validation is '{_QUALIFIED_NAME}')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '({_QUALIFIED_NAME})?')"
)


def _qualified_name_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN_RE.fullmatch(prefix)):
        return "prefix part " + _SUBDOMAIN_MSG
    if not name or len(name) > 63:
        return "name part must be non-empty and no more than 63 characters"
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        return _QUALIFIED_NAME_MSG
    return None


def validate_labels_and_annotations(obj: JSON) -> list[JSON]:
    """Causes for label keys and values, and annotation keys, that the real server refuses."""
    meta = obj.get("metadata") or {}
    causes: list[JSON] = []
    labels = meta.get("labels") or {}
    if isinstance(labels, dict):
        for key, value in labels.items():
            problem = _qualified_name_problem(str(key))
            if problem:
                causes.append(
                    cause("metadata.labels", f"Invalid value: {go_value(key)}: {problem}")
                )
            valid = isinstance(value, str) and len(value) <= 63
            if not valid or not _LABEL_VALUE_RE.fullmatch(value):
                message = f"Invalid value: {go_value(value)}: {_LABEL_VALUE_MSG}"
                causes.append(cause("metadata.labels", message))
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict):
        for key in annotations:
            problem = _qualified_name_problem(str(key))
            if problem:
                causes.append(
                    cause("metadata.annotations", f"Invalid value: {go_value(key)}: {problem}")
                )
    return causes


def validate_core_event(obj: JSON) -> list[JSON]:
    """Causes for a core/v1 Event whose involvedObject is in another namespace than it."""
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    involved = obj.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or "" if isinstance(involved, dict) else ""
    if not involved_ns:
        bad = namespace not in ("", "default")
    else:
        bad = bool(namespace) and involved_ns != namespace
    if bad:
        return [
            cause(
                "involvedObject.namespace",
                f"Invalid value: {go_value(involved_ns)}: does not match event.namespace",
            )
        ]
    return []


def prune_lease(obj: JSON) -> list[str]:
    """Drop fields a Lease does not have, as typed decoding on the real server does;
    returns their paths."""
    removed = [k for k in obj if k not in ("apiVersion", "kind", "metadata", "spec")]
    for key in removed:
        del obj[key]
    spec = obj.get("spec")
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in LEASE_SPEC_FIELDS]
        for key in unknown:
            del spec[key]
        removed += [f"spec.{k}" for k in unknown]
    return removed


def validate_lease(obj: JSON) -> list[JSON]:
    """Causes for an invalid Lease spec, as ``ValidateLeaseSpec`` reports them."""
    spec = obj.get("spec") or {}
    causes: list[JSON] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        causes.append(
            cause(
                "spec.leaseDurationSeconds",
                f"Invalid value: {go_value(duration)}: must be greater than 0",
            )
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
        causes.append(
            cause(
                "spec.leaseTransitions",
                f"Invalid value: {go_value(transitions)}: must be greater than or equal to 0",
            )
        )
    return causes


def validate_crd(obj: JSON) -> list[JSON]:
    """Causes for a CRD the real server would refuse (the checks that matter to us)."""
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[JSON] = []
    for field, value in (
        ("spec.group", spec.get("group")),
        ("spec.names.plural", names.get("plural")),
        ("spec.names.kind", names.get("kind")),
    ):
        if not value:
            causes.append(cause(field, "Required value", "FieldValueRequired"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            cause(
                "spec.scope",
                f"Unsupported value: {go_value(spec.get('scope'))}: supported values: "
                '"Cluster", "Namespaced"',
                "FieldValueNotSupported",
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        causes.append(
            cause(
                "spec.versions",
                "Invalid value: null: must have exactly one version marked as storage version",
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            cause(
                "spec.versions",
                "Invalid value: "
                + go_value(versions)
                + ": must have exactly one version marked as storage version",
            )
        )
        if not any(v.get("storage") for v in versions):
            causes.append(
                cause(
                    "status.storedVersions",
                    "Invalid value: null: must have at least one stored version",
                )
            )
    if names.get("plural") and spec.get("group"):
        expected = f"{names['plural']}.{spec['group']}"
        if obj["metadata"].get("name") != expected:
            causes.append(
                cause(
                    "metadata.name",
                    f"Invalid value: {go_value(obj['metadata'].get('name'))}: "
                    'must be spec.names.plural+"."+spec.group',
                )
            )
    return causes


# --- custom resources ---------------------------------------------------------------------


def prune_and_default(
    obj: Any, schema: JSON, root: bool = True, path: str = "", removed: list[str] | None = None
) -> Any:
    """Drop fields the structural schema does not know and fill in ``default`` values.

    The real server does both silently (no error) before validating; the paths of dropped
    fields are appended to ``removed`` for ``fieldValidation=Strict``.
    """
    dropped = removed if removed is not None else []
    if isinstance(obj, dict):
        props = schema.get("properties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        additional = schema.get("additionalProperties")
        if props is not None:
            for key in list(obj):
                if root and key in ("apiVersion", "kind", "metadata"):
                    continue
                where = f"{path}.{key}" if path else key
                if key in props:
                    obj[key] = prune_and_default(obj[key], props[key], False, where, dropped)
                elif isinstance(additional, dict):
                    obj[key] = prune_and_default(obj[key], additional, False, where, dropped)
                elif not preserve and additional is not True:
                    del obj[key]
                    dropped.append(where)
            for key, sub in props.items():
                if key not in obj and "default" in sub:
                    obj[key] = copy.deepcopy(sub["default"])
        elif isinstance(additional, dict):
            for key in list(obj):
                where = f"{path}.{key}" if path else key
                obj[key] = prune_and_default(obj[key], additional, False, where, dropped)
        elif (
            not preserve and not root and additional is not True and schema.get("type") == "object"
        ):
            dropped.extend(f"{path}.{key}" for key in obj)
            obj.clear()
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [
            prune_and_default(item, schema["items"], False, f"{path}[{i}]", dropped)
            for i, item in enumerate(obj)
        ]
    return obj


def to_json_schema(schema: Any) -> Any:
    """Translate OpenAPI v3 extensions (``nullable``, int-or-string) for ``jsonschema``."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: to_json_schema(v) for k, v in schema.items() if not k.startswith("x-kubernetes")}
    for key in ("properties", "patternProperties", "definitions"):
        if isinstance(schema.get(key), dict):
            out[key] = {k: to_json_schema(v) for k, v in schema[key].items()}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    out.pop("nullable", None)
    out.pop("format", None)
    return out


def _field(path: Any) -> str:
    parts: list[str] = []
    for p in path:
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{p}]"]
        else:
            parts.append(str(p))
    return ".".join(parts)


def _cause_for(error: jsonschema.ValidationError) -> JSON:
    path = _field(error.absolute_path)
    value = error.instance
    expected_value: Any = error.validator_value
    schema: Any = error.schema
    shown = go_value(value)
    where = path or "<root>"
    if error.validator == "required":
        missing = re.findall(r"'([^']*)' is a required property", error.message)
        field = f"{path}.{missing[0]}" if path and missing else (missing[0] if missing else path)
        return cause(field, "Required value", "FieldValueRequired")
    if error.validator == "type":
        expected = expected_value
        if isinstance(expected, list):
            expected = expected[0]
        return cause(
            path,
            f"Invalid value: {shown}: {where} in body must be of type {expected}: {shown}",
            "FieldValueTypeInvalid",
        )
    if error.validator == "enum":
        allowed = ", ".join(go_value(v) for v in expected_value)
        return cause(
            path,
            f"Unsupported value: {shown}: supported values: {allowed}",
            "FieldValueNotSupported",
        )
    if error.validator == "pattern":
        return cause(
            path, f"Invalid value: {shown}: {where} in body should match '{expected_value}'"
        )
    if error.validator in ("minimum", "maximum"):
        word = "greater" if error.validator == "minimum" else "less"
        exclusive = schema.get(f"exclusive{error.validator.capitalize()}") is True
        rel = "than" if exclusive else "than or equal to"
        return cause(
            path,
            f"Invalid value: {shown}: {where} in body should be {word} {rel} {expected_value}",
        )
    if error.validator in ("minLength", "maxLength", "minItems", "maxItems"):
        return cause(
            path, f"Invalid value: {shown}: {where} in body {error.message}", "FieldValueTooLong"
        )
    return cause(path, f"Invalid value: {shown}: {error.message}")


class SchemaValidator:
    """Validates custom resources of one CRD version against its ``openAPIV3Schema``."""

    def __init__(self, schema: JSON | None) -> None:
        self.schema = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        body = to_json_schema(self.schema)
        if isinstance(body.get("properties"), dict):
            # The server owns these; the schema may not constrain them beyond their shape.
            for key in ("apiVersion", "kind", "metadata"):
                body["properties"].pop(key, None)
        self._validator = jsonschema.Draft4Validator(body)

    def apply(self, obj: JSON, removed: list[str] | None = None) -> list[JSON]:
        """Prune and default ``obj`` in place, then return validation causes (empty if valid).

        Paths of pruned (unknown) fields are appended to ``removed`` when given.
        """
        prune_and_default(obj, self.schema, removed=removed)
        errors = sorted(self._validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
        return [_cause_for(e) for e in errors]


def status_error_if(causes: list[JSON], kind: str, group: str, name: str) -> StatusError | None:
    """A 422 Invalid error for ``causes``, or None when there are none."""
    from .statusbody import invalid

    return invalid(kind, group, name, causes) if causes else None
