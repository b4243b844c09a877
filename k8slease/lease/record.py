"""The neutral Lease record and pure converters to and from a ``coordination.k8s.io/v1`` Lease.

A :class:`LeaseRecord` holds what the election algorithm needs from a Lease, in the fields
client-go uses (``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``, ``renewTime``,
``leaseTransitions``) plus the fencing token k8slease keeps in an annotation. The converters take
and return plain dicts (the JSON body) so that fields k8slease does not know, such as ``strategy``,
``preferredHolder``, labels and annotations, survive every write untouched.

Nothing here does I/O or reads a clock. A Lease edited by hand into nonsense never raises: the
record lists what was wrong in :attr:`LeaseRecord.problems` and the decision code treats such a
Lease as held by someone unknown.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from k8slease.kube.microtime import format_microtime, time_field
from k8slease.lease.meta import annotations_of
from k8slease.names import ANN_FENCING_TOKEN

_DIGITS = re.compile(r"[0-9]{1,19}")

#: The holder of a Lease whose ``holderIdentity`` is not a string: held, by nobody we know.
UNREADABLE_HOLDER = "<malformed>"

#: The most ``leaseDurationSeconds`` and ``leaseTransitions`` can hold (int32 in the Lease API).
INT32_MAX = 2**31 - 1
#: The most a fencing token can be: int64, what the operator's status (and most systems a job
#: writes to) can store. A grant at this ceiling keeps it (see :mod:`k8slease.lease.rules`).
FENCING_TOKEN_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What a Lease says about who holds it.

    ``holder`` is empty when nobody holds the Lease (never acquired, or released).
    ``fencing_token`` grows by one with every grant and is shared by all replicas through the Lease.
    ``problems`` is empty for a well-formed Lease; otherwise it says what was malformed.
    """

    holder: str = ""
    duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0
    fencing_token: int = 0
    problems: tuple[str, ...] = field(default=())
    #: False when ``holderIdentity`` (or the whole spec) could not be read: then ``holder`` is
    #: :data:`UNREADABLE_HOLDER`, or empty with an unreadable spec, and says nothing about anyone.
    holder_readable: bool = field(default=True, compare=False)

    @property
    def held(self) -> bool:
        """True when some identity holds the Lease."""
        return bool(self.holder)

    @property
    def malformed(self) -> bool:
        """True when the Lease could not be read as written by a well-behaved client."""
        return bool(self.problems)


def _int_field(value: Any, name: str, problems: list[str], *, minimum: int) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{name} is not an integer: {shown(value)}")
        return 0
    if value < minimum or value > INT32_MAX:
        problems.append(f"{name} must be in {minimum}..{INT32_MAX}, got {shown(value)}")
        return 0
    return value


def parse_fencing_token(raw: object) -> int:
    """The fencing-token annotation's value: decimal digits, 0..:data:`FENCING_TOKEN_MAX`.

    Raises ``ValueError`` for anything else (signs, blanks, other scripts' digits, a number too
    big for int64), so that every token read can be written back and stored.
    """
    if not isinstance(raw, str) or not _DIGITS.fullmatch(raw):
        raise ValueError(f"not a non-negative integer: {shown(raw)}")
    token = int(raw)
    if token > FENCING_TOKEN_MAX:
        raise ValueError(f"greater than {FENCING_TOKEN_MAX}: {shown(raw)}")
    return token


def shown(value: object, limit: int = 80) -> str:
    """``value``'s repr for a problem or log text, cut to ``limit`` characters."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def record_from_lease(lease: Mapping[str, Any]) -> LeaseRecord:
    """Read a :class:`LeaseRecord` from a Lease body. Never raises on the Lease's content."""
    problems: list[str] = []
    readable = True
    spec = lease.get("spec")
    if spec is None:
        problems.append("spec is missing")
        spec, readable = {}, False
    if not isinstance(spec, Mapping):
        problems.append(f"spec is not an object: {type(spec).__name__}")
        spec, readable = {}, False
    holder = spec.get("holderIdentity")
    if holder is None:
        holder = ""
    if not isinstance(holder, str):
        problems.append(f"holderIdentity is not a string: {shown(holder)}")
        holder, readable = UNREADABLE_HOLDER, False
    duration = _int_field(
        spec.get("leaseDurationSeconds"), "leaseDurationSeconds", problems, minimum=1
    )
    if holder and "leaseDurationSeconds" not in spec:
        problems.append("leaseDurationSeconds is missing on a held Lease")
    transitions = _int_field(spec.get("leaseTransitions"), "leaseTransitions", problems, minimum=0)
    acquire = time_field(spec.get("acquireTime"), "acquireTime", problems)
    renew = time_field(spec.get("renewTime"), "renewTime", problems)

    token = 0
    raw_token = annotations_of(lease).get(ANN_FENCING_TOKEN)
    if raw_token is not None:
        try:
            token = parse_fencing_token(raw_token)
        except ValueError as exc:
            problems.append(f"{ANN_FENCING_TOKEN} is {exc}")
            token = 0
    return LeaseRecord(
        holder=holder,
        duration_seconds=duration,
        acquire_time=acquire,
        renew_time=renew,
        transitions=transitions,
        fencing_token=token,
        problems=tuple(problems),
        holder_readable=readable,
    )


def lease_with_record(lease: Mapping[str, Any], record: LeaseRecord) -> dict[str, Any]:
    """Return a copy of ``lease`` with ``record`` written into it.

    Fields the record does not own are preserved, including ``metadata.resourceVersion`` so that the
    result can be PUT as a conditional update, and ``metadata.uid``, so that a PUT to a Lease
    deleted since it was read fails the server's UID precondition (409) instead of creating it.
    An empty holder is written as an absent ``holderIdentity`` with the other fields kept, as
    client-go does on release.
    """
    body: dict[str, Any] = copy.deepcopy(dict(lease))
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    spec = dict(spec)
    if record.holder:
        spec["holderIdentity"] = record.holder
    else:
        spec.pop("holderIdentity", None)
    spec["leaseDurationSeconds"] = max(1, int(record.duration_seconds))
    spec["leaseTransitions"] = int(record.transitions)
    for key, value in (("acquireTime", record.acquire_time), ("renewTime", record.renew_time)):
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = format_microtime(value)
    body["spec"] = spec
    metadata = body.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    annotations = metadata.get("annotations")
    annotations = dict(annotations) if isinstance(annotations, dict) else {}
    annotations[ANN_FENCING_TOKEN] = str(record.fencing_token)
    metadata["annotations"] = annotations
    body["metadata"] = metadata
    body.setdefault("apiVersion", "coordination.k8s.io/v1")
    body.setdefault("kind", "Lease")
    return body


def new_lease(
    name: str,
    namespace: str,
    record: LeaseRecord,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Lease body to create, carrying ``record``, ``labels`` and extra ``annotations``."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    base = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata}
    return lease_with_record(base, record)
