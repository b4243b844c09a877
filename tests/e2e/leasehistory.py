"""Every version of every Lease of a namespace, from one list+watch that outlives any pod.

The suite's record of what happened: a job lock's every claim (``claimed-tick``, holder,
fencing token) and every finished run (the ``last-run`` run record: tick, holder, outcome) is a
write to its Lease, and a watch delivers every write in order. Unlike a pod's log, nothing
here is gone when a pod is deleted, and a watch started by a test sees only what happened
after it started (plus the current state), so each test judges its own window.

The watcher uses the Kubernetes Python client directly (not k8slease's code: what is observed
must not be the observer). A watch that breaks resumes from the last resourceVersion it saw;
one the server ends with ``410 Gone`` (history compacted) is marked :attr:`LeaseHistory.gaps`,
and the tests refuse to judge a window with a gap.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

DOMAIN = "k8slease.io"
CLAIMED_TICK = f"{DOMAIN}/claimed-tick"
LAST_RUN = f"{DOMAIN}/last-run"


def parse_time(text: object) -> datetime | None:
    """A Kubernetes (Micro)Time string as an aware datetime; ``None`` for anything else."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class LeaseVersion:
    """One version of one Lease as the watch delivered it (``event``: ADDED, MODIFIED,
    DELETED, or LISTED for the state found when the watch started)."""

    event: str
    name: str
    resource_version: str
    holder: str
    acquired: datetime | None
    renewed: datetime | None
    annotations: Mapping[str, str]
    seen: float  # time.time() when the watcher got it

    @classmethod
    def from_object(cls, event: str, obj: Mapping[str, Any], seen: float) -> LeaseVersion:
        metadata = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        return cls(
            event=event,
            name=str(metadata.get("name", "")),
            resource_version=str(metadata.get("resourceVersion", "")),
            holder=str(spec.get("holderIdentity") or ""),
            acquired=parse_time(spec.get("acquireTime")),
            renewed=parse_time(spec.get("renewTime")),
            annotations=dict(metadata.get("annotations") or {}),
            seen=seen,
        )


@dataclass(frozen=True)
class Run:
    """A finished run of a job, from a ``last-run`` record."""

    tick: datetime
    holder: str
    outcome: str
    fencing_token: int
    error: str | None


@dataclass(frozen=True)
class Claim:
    """A tick claimed on a job Lease: who claimed it, with which fencing token."""

    tick: datetime
    holder: str
    fencing_token: str


@dataclass(frozen=True)
class Handover:
    old: str
    new: str
    gap_seconds: float


@dataclass
class LeaseHistory:
    """Watches every Lease of ``namespace`` from a background thread; see the module doc."""

    kubeconfig: Path
    namespace: str
    versions: list[LeaseVersion] = field(default_factory=list, init=False)
    #: why the history has holes (a watch ended with 410 Gone and was listed again)
    gaps: list[str] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _synced: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __enter__(self) -> LeaseHistory:
        api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        self._api = client.CoordinationV1Api(api_client)
        self._thread = threading.Thread(target=self._run, name="leasehistory", daemon=True)
        self._thread.start()
        if not self._synced.wait(60):
            raise AssertionError(f"the Lease watch of {self.namespace} did not start in 60 s")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        self._api.api_client.close()

    def _add(self, event: str, obj: Mapping[str, Any]) -> str:
        version = LeaseVersion.from_object(event, obj, time.time())
        with self._lock:
            self.versions.append(version)
        return version.resource_version

    def _list(self) -> str:
        listed = self._api.list_namespaced_lease(
            self.namespace, _preload_content=False, _request_timeout=30
        )
        body = json.loads(listed.data)
        for item in body.get("items", []):
            self._add("LISTED", item)
        return str(body["metadata"]["resourceVersion"])

    def _run(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    resource_version = self._list()
                    self._synced.set()
                resource_version = self._watch(resource_version)
            except Exception as error:  # the API server went away for a moment: resume
                if self._stop.wait(0.5):
                    return
                if "410" in str(error):
                    self.gaps.append(f"watch expired: {error}")
                    resource_version = ""

    def _watch(self, resource_version: str) -> str:
        stream = watch.Watch()
        for event in stream.stream(
            self._api.list_namespaced_lease,
            self.namespace,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=30,  # short watches: a stop is noticed within this
            _request_timeout=60,
        ):
            kind, obj = event["type"], event["raw_object"]
            if kind == "ERROR":
                if obj.get("code") == 410:
                    self.gaps.append(f"watch expired at {resource_version}: {obj.get('message')}")
                    return ""
                raise RuntimeError(f"watch error: {obj}")
            if kind == "BOOKMARK":
                resource_version = obj["metadata"]["resourceVersion"]
            else:
                resource_version = self._add(kind, obj)
            if self._stop.is_set():
                stream.stop()
                break
        return resource_version

    # -- reading ------------------------------------------------------------------------------

    def of(self, name: str) -> list[LeaseVersion]:
        with self._lock:
            return [v for v in self.versions if v.name == name]

    def runs(self, name: str) -> list[Run]:
        return runs_in(self.of(name))

    def claims(self, name: str) -> list[Claim]:
        return claims_in(self.of(name))

    def handovers(self, name: str) -> list[Handover]:
        return handovers_in(self.of(name))


def runs_in(versions: Iterable[LeaseVersion]) -> list[Run]:
    """The distinct run records that the versions of a job Lease carried, in order."""
    found: dict[str, Run] = {}
    for version in versions:
        raw = version.annotations.get(LAST_RUN)
        if raw is None or raw in found:
            continue
        data = json.loads(raw)
        tick = parse_time(data.get("tick"))
        assert tick is not None, f"a run record without a tick: {raw}"
        found[raw] = Run(
            tick=tick,
            holder=str(data.get("holder", "")),
            outcome=str(data.get("outcome", "")),
            fencing_token=int(data.get("fencingToken", 0)),
            error=data.get("error"),
        )
    return list(found.values())


def claims_in(versions: Iterable[LeaseVersion]) -> list[Claim]:
    """The distinct (tick, holder, fencing token) claims that the versions carried, in order."""
    found: dict[tuple[str, str, str], Claim] = {}
    for version in versions:
        tick = parse_time(version.annotations.get(CLAIMED_TICK))
        if tick is None:
            continue
        token = version.annotations.get(f"{DOMAIN}/fencing-token", "")
        key = (tick.isoformat(), version.holder, token)
        found.setdefault(key, Claim(tick, version.holder, token))
    return list(found.values())


def handovers_in(versions: Iterable[LeaseVersion]) -> list[Handover]:
    """Each change of a leader Lease's holder to a different, non-empty holder, with the gap:
    the new holder's ``acquireTime`` minus the old holder's last ``renewTime`` (its last
    renewal, or the release it wrote on SIGTERM). Both are the electors' own stamps, so the gap
    does not depend on when the watcher saw the changes."""
    found: list[Handover] = []
    last: LeaseVersion | None = None  # the last version with a non-empty holder
    released: LeaseVersion | None = None
    for seen in versions:
        if seen.event == "DELETED":
            continue
        if not seen.holder:
            released = seen
            continue
        if last is not None and seen.holder != last.holder and seen.acquired is not None:
            end = released.renewed if released is not None else last.renewed
            assert end is not None
            found.append(Handover(last.holder, seen.holder, (seen.acquired - end).total_seconds()))
        last, released = seen, None
    return found


def grid(start: datetime, end: datetime, *, every: float) -> list[datetime]:
    """The ticks of an interval job (``every`` seconds counted from 2000-01-01 UTC, as
    k8slease's interval triggers count them) in ``[start, end]``."""
    anchor = datetime(2000, 1, 1, tzinfo=UTC)
    step = timedelta(seconds=every)
    first = anchor + step * -(-(start - anchor) // step)  # ceil
    ticks = []
    tick = first
    while tick <= end:
        ticks.append(tick)
        tick += step
    return ticks
