"""Kept run records read from ended containers, merged into the job Leases (issue 26).

A replica keeps a run record whose release it could not write, and writes it through to its
journal, the container's termination message (:mod:`k8slease.jobs.journal`). If the replica dies
before it can write the record itself, the kubelet has copied the journal into the Pod's status
(``status.containerStatuses[].state.terminated.message``, or ``lastState`` once the container
restarted). The operator watches the Pods labelled ``k8slease.io/group`` in its namespaces and
merges each journal it finds into the job Leases it names, in the Pod's namespace:

* the record is merged by :func:`~k8slease.lease.keptruns.merge_run`, the rule the replica
  itself uses: a tick recorded ``lost`` by a takeover gets its real outcome back; a record the
  Lease already holds is not written again;
* when the Lease still names the record's holder with the record's fencing token, that holder's
  grant was never released: its container has ended, so the lock is released in the same write
  (as the replica would have done), and the next tick is claimed at once;
* the container's ID is added to the Lease's ``k8slease.io/journals-merged`` in the same
  conditional write, so a journal seen again (the Pod's next event, an operator restart) is
  never merged twice; a Conflict reads the Lease again and judges afresh;
* a record is merged only when it is the Pod's own (:func:`own_record`: its holder is the Pod's
  name, or the name plus one ``-``-free segment, k8slease's default identity): a Pod may speak
  for itself, not for the replica whose tick it would like to see recorded ``succeeded``.

The rules here are pure; :class:`JournalMerger` does the I/O.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from k8slease.clock import Clock
from k8slease.errors import Conflict, NotFound, TransportError
from k8slease.kube.backoff import backoff_delay
from k8slease.lease.jobrecord import JobState, RunRecord
from k8slease.lease.keptruns import Journal, decode_journal, merge_run, merged_journals
from k8slease.lease.keptruns import with_merged_journal as merged_annotation
from k8slease.lease.record import LeaseRecord
from k8slease.lease.rules import release_record
from k8slease.lease.store import LeaseStore
from k8slease.lease.view import LeaseView
from k8slease.logs import get_logger
from k8slease.names import LABEL_ROLE, ROLE_JOB
from k8slease.operator.settings import OperatorConfig
from k8slease.shown import shown

log = get_logger("k8slease.operator.journals")

#: How many times one record is judged again after a Conflict before it waits for a later try.
_CONFLICT_TRIES = 3


@dataclass(frozen=True, slots=True)
class PodJournal:
    """The journal an ended container of Pod ``namespace/pod`` left; ``container_id`` names
    that container run (a restarted container's next run has another)."""

    namespace: str
    pod: str
    container_id: str
    journal: Journal


@dataclass(frozen=True, slots=True)
class Merge:
    """What to write into a job Lease for one kept record: the lock record (released when the
    Lease still names the record's grant) and the job state with the record merged."""

    record: LeaseRecord
    state: JobState
    released: bool


def pod_journals(pod: Mapping[str, Any]) -> list[PodJournal]:
    """The journals of ``pod``'s ended containers (current and previous runs). Never raises on
    a Pod's content: anything not a k8slease journal is passed over."""
    metadata = _map(pod.get("metadata"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return []
    found: list[PodJournal] = []
    statuses = _map(pod.get("status")).get("containerStatuses")
    for status in statuses if isinstance(statuses, list) else []:
        status = _map(status)
        for state_key in ("state", "lastState"):
            ended = _map(_map(status.get(state_key)).get("terminated"))
            journal = decode_journal(ended.get("message"))
            if journal is None:
                continue
            container_id = ended.get("containerID")
            if not isinstance(container_id, str) or not container_id:
                # no runtime ID (a Pod's status written by hand): the run's start names it
                container_id = f"{namespace}/{name}/{status.get('name')}/{ended.get('startedAt')}"
            found.append(PodJournal(namespace, name, container_id, journal))
    return found


def own_record(pod: str, holder: str) -> bool:
    """Whether a run held by ``holder`` may be merged from Pod ``pod``'s journal: ``holder`` is
    the Pod's name, or the name, ``-`` and one more segment (no ``-``, no ``/``: the default
    identity is ``POD_NAME-xxxxx``). One segment only, so that Pod ``billing`` cannot speak for
    ``billing-7d9f8c6b5-p0w3n-ab12c``, the identity of a Pod whose name merely starts alike."""
    if holder == pod:
        return True
    suffix = holder.removeprefix(f"{pod}-")
    return suffix != holder and suffix != "" and "-" not in suffix and "/" not in suffix


def judge_merge(
    view: LeaseView, run: RunRecord, *, container_id: str, now: datetime
) -> Merge | None:
    """What to write into job Lease ``view`` for ``run`` from ``container_id``'s journal;
    ``None`` when nothing: that journal was merged already, the Lease is not a job lock or was
    edited into something unreadable, or it records ``run`` already."""
    if view.labels.get(LABEL_ROLE) != ROLE_JOB or view.record.malformed:
        return None
    if container_id in merged_journals(view.body):
        return None
    state = merge_run(view.job, run, lease_token=view.fencing_token)
    if state is None:
        return None
    record = view.record
    released = (
        record.held and record.holder == run.holder and record.fencing_token == run.fencing_token
    )
    if released:
        record = release_record(record, now=now)
    return Merge(record=record, state=state, released=released)


class JournalMerger:
    """Merges the journals of ended containers into job Leases, one namespace's Leases through
    one store each (``stores`` makes it).

    :meth:`on_pod` (on the operator's event loop) starts one task per new journal, which merges
    it in a worker thread (:meth:`merge`) and tries again after a failure (the API server away,
    Conflicts each time) with the back-off of the status writes (``write_backoff_initial``
    doubling up to ``write_backoff_max``, jittered), ``journal_tries`` times in all. Each
    container's journal is merged once per operator run, and once for good by the Lease's list
    of merged journals.
    """

    #: container IDs remembered as merged (the Lease's own list is what counts)
    REMEMBERED = 1024

    def __init__(
        self, stores: Callable[[str], LeaseStore], settings: OperatorConfig, *, now: Clock
    ) -> None:
        self._stores = stores
        self._settings = settings
        self._now = now
        self._rng = random.Random()
        self._done: dict[str, None] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def on_pod(self, pod: Mapping[str, Any]) -> None:
        """Start merging the journals ``pod`` carries that are not merged or being merged."""
        for found in pod_journals(pod):
            key = found.container_id
            if key not in self._done and key not in self._tasks:
                self._tasks[key] = asyncio.create_task(
                    self._merge_until_done(found), name=f"k8slease-journal-{found.pod}"
                )

    async def stop(self) -> None:
        """Cancel the merges under way (a journal not merged yet is merged by the next run)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _merge_until_done(self, found: PodJournal) -> None:
        tries = self._settings.journal_tries
        try:
            for attempt in range(1, tries + 1):
                try:
                    outcomes = await asyncio.to_thread(self.merge, found)
                except TransportError as exc:
                    why = str(exc)
                else:
                    if "conflict" not in outcomes:
                        self._done[found.container_id] = None
                        while len(self._done) > self.REMEMBERED:
                            del self._done[next(iter(self._done))]
                        return
                    why = "the Lease kept changing (Conflicts)"
                delay = backoff_delay(
                    attempt,
                    initial=self._settings.write_backoff_initial,
                    cap=self._settings.write_backoff_max,
                    rng=self._rng,
                )
                last = attempt == tries
                log.warning(
                    "operator.journal_merge_failed",
                    pod=f"{found.namespace}/{found.pod}",
                    attempt=attempt,
                    error=why,
                    retry_in=None if last else round(delay, 3),
                )
                if not last:
                    await asyncio.sleep(delay)
            log.error(
                "operator.journal_not_merged",
                pod=f"{found.namespace}/{found.pod}",
                container=found.container_id,
                tries=tries,
            )
        finally:
            self._tasks.pop(found.container_id, None)

    def merge(self, found: PodJournal) -> list[str]:
        """Merge every record of ``found``; what happened to each (``merged``, ``released``,
        ``nothing``, ``gone``, ``conflict``, ``foreign``), in order. Raises
        :class:`~k8slease.errors.TransportError` when the API server cannot be asked: the
        records merged so far are in their Leases, the rest are judged again at the next try."""
        store = self._stores(found.namespace)
        for problem in found.journal.problems:
            log.warning("operator.journal_entry_skipped", pod=found.pod, problem=problem)
        outcomes = []
        for kept in found.journal.runs:
            if own_record(found.pod, kept.run.holder):
                outcomes.append(self._merge_one(store, found, kept.lease, kept.run))
                continue
            log.warning(
                "operator.journal_entry_skipped",
                pod=found.pod,
                problem=f"a record of {shown(kept.run.holder)}, not of this Pod",
            )
            outcomes.append("foreign")
        return outcomes

    def _merge_one(self, store: LeaseStore, found: PodJournal, lease: str, run: RunRecord) -> str:
        for _ in range(_CONFLICT_TRIES):
            view = store.find(lease)
            if view is None:
                return "gone"
            merge = judge_merge(view, run, container_id=found.container_id, now=self._now.now())
            if merge is None:
                return "nothing"
            try:
                marked = view.annotated(merged_annotation(view.body, found.container_id))
                store.update(lease, marked, record=merge.record, state=merge.state)
            except Conflict:
                continue  # someone wrote meanwhile: read and judge again
            except NotFound:
                return "gone"
            log.warning(
                "operator.journal_merged",
                namespace=found.namespace,
                pod=found.pod,
                lease=lease,
                tick=run.tick.isoformat(),
                outcome=run.outcome,
                fencing_token=run.fencing_token,
                released=merge.released,
            )
            return "released" if merge.released else "merged"
        return "conflict"


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
