"""Kept run records: runs that finished while their release could not be written (issue 26).

A replica whose release got no answer keeps the run's record and writes it with its next write
to the job's Lease (:mod:`k8slease.jobs.settle`). Until then the record lives in the replica's
memory and in its **journal** (:mod:`k8slease.jobs.journal`): a file, by default the
container's termination message (``/dev/termination-log``), which the kubelet copies into the
Pod's status when the container ends, however it ends. A replica that dies before it can write
leaves the record there; the operator reads it from the Pod and merges it into the Lease
(:mod:`k8slease.operator.podjournals`). This module is what both sides share:

* the journal's format: :func:`encode_journal` (newest records first, within the 4096 bytes the
  kubelet keeps of a termination message) and :func:`decode_journal` (never raises);
* :func:`merge_run`, the rule that merges one kept record into a job Lease's state;
* the Lease's list of journals already merged (:func:`merged_journals`), written in the same
  conditional write as the merge, so that a journal read again (a Pod event repeated, an
  operator restarted) is never merged twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from k8slease.lease.jobrecord import JobState, RunRecord
from k8slease.lease.meta import annotations_of
from k8slease.names import ANN_JOURNALS_MERGED, JOURNAL_KEY

#: The most of a termination message the kubelet keeps (bytes); a journal is cut to fit.
MESSAGE_LIMIT = 4096
#: How many merged journals a Lease remembers (a journal is merged within seconds of its
#: container's end; older ones are never read again).
MERGED_KEPT = 8
#: The longest error text a journal keeps of a run (the outcome is what matters).
_ERROR_KEPT = 120


class KeptRun(NamedTuple):
    """A run record kept for the job Lease ``lease`` (in the replica's namespace)."""

    lease: str
    run: RunRecord


@dataclass(frozen=True, slots=True)
class Journal:
    """A decoded journal: its records, and what was wrong with entries that were skipped."""

    runs: tuple[KeptRun, ...]
    problems: tuple[str, ...] = ()


def encode_journal(kept: Iterable[KeptRun], *, limit: int = MESSAGE_LIMIT) -> tuple[str, int]:
    """The journal text of ``kept`` (empty for none) and how many records did not fit in
    ``limit`` bytes: the newest (by finish) are kept, error texts cut short."""
    entries: list[dict[str, Any]] = []
    ordered = sorted(kept, key=lambda k: (k.run.finished, k.lease), reverse=True)
    for item in ordered:
        data = json.loads(item.run.to_json())
        if "error" in data and len(data["error"]) > _ERROR_KEPT:
            data["error"] = data["error"][: _ERROR_KEPT - 3] + "..."
        entries.append({"lease": item.lease, "run": data})
    while entries:
        text = json.dumps({JOURNAL_KEY: entries}, separators=(",", ":"), sort_keys=True)
        if len(text.encode()) <= limit:
            return text, len(ordered) - len(entries)
        entries.pop()
    return "", len(ordered)


def decode_journal(text: object) -> Journal | None:
    """The journal in ``text`` (a termination message); ``None`` when ``text`` is not one (any
    other message, garbage). Never raises: an entry that does not decode is skipped and named
    in ``problems``."""
    if not isinstance(text, str) or JOURNAL_KEY not in text:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get(JOURNAL_KEY), list):
        return None
    runs: list[KeptRun] = []
    problems: list[str] = []
    for index, entry in enumerate(data[JOURNAL_KEY]):
        lease = entry.get("lease") if isinstance(entry, dict) else None
        raw = entry.get("run") if isinstance(entry, dict) else None
        if not isinstance(lease, str) or not lease or not isinstance(raw, dict):
            problems.append(f"entry {index}: not a lease name and a run record")
            continue
        try:
            run = RunRecord.from_json(json.dumps(raw))
        except ValueError as exc:
            problems.append(f"entry {index} ({lease}): {exc}")
            continue
        runs.append(KeptRun(lease=lease, run=run))
    return Journal(runs=tuple(runs), problems=tuple(problems))


def merged_journals(lease: Mapping[str, Any]) -> tuple[str, ...]:
    """The journals (container IDs) already merged into ``lease`` (a Lease body); a value a
    hand edit garbled reads as none."""
    raw = annotations_of(lease).get(ANN_JOURNALS_MERGED)
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return ()
    if not isinstance(data, list):
        return ()
    return tuple(item for item in data if isinstance(item, str))


def with_merged_journal(lease: Mapping[str, Any], container: str) -> dict[str, str]:
    """The annotation that records ``container``'s journal as merged into ``lease`` (the
    :data:`MERGED_KEPT` newest kept), to write with the merge."""
    merged = [c for c in merged_journals(lease) if c != container] + [container]
    value = json.dumps(merged[-MERGED_KEPT:], separators=(",", ":"))
    return {ANN_JOURNALS_MERGED: value}


def merge_run(state: JobState, run: RunRecord, *, lease_token: int) -> JobState | None:
    """``state`` (of a Lease whose fencing token is ``lease_token``) with ``run`` recorded, or
    ``None`` when there is nothing to write.

    * the Lease already records ``run`` (an indeterminate release that was applied), or this
      replica's own record of that tick: nothing;
    * the Lease records the same tick and token as ``lost`` (another replica took the lock over
      while this replica could not write, and recorded the run it could not see finish): the
      record is corrected, one ``lost`` turned into ``run``'s outcome;
    * the lock was granted again since (``lease_token`` above ``run``'s): whoever took it over
      found ``run``'s tick unfinished and counted it ``lost``; a ``lost`` run adds nothing, any
      other outcome turns one ``lost`` into it and is written as the last run (though an older
      tick's) so that watchers see the correction;
    * else (the Lease still at ``run``'s grant): ``run`` becomes the last run if it is newer,
      its outcome is counted, a completing outcome moves the completed tick on.
    """
    last = state.last_run
    counts = dict(state.counts)
    if last is not None and last.tick == run.tick and last.fencing_token == run.fencing_token:
        if last.outcome == run.outcome or last.outcome != "lost":
            return None  # already there, or the holder's own record: the real one
        return _corrected(state, run, counts, newest=run)
    if lease_token > run.fencing_token:
        if run.outcome == "lost":
            return None
        # the corrected record is this write's last run, even when an older tick's: the
        # operator (and anyone watching) learns the tick's real outcome from it; the next
        # release records the newest run again
        return _corrected(state, run, counts, newest=run)
    counts[run.outcome] = counts.get(run.outcome, 0) + 1
    newest = run if last is None or last.tick < run.tick else last
    return replace(state, last_run=newest, counts=counts, completed_tick=_completed(state, run))


def _corrected(
    state: JobState, run: RunRecord, counts: dict[str, int], *, newest: RunRecord
) -> JobState:
    """One ``lost`` (counted by a takeover for ``run``'s tick) turned into ``run``'s outcome."""
    counts["lost"] = max(0, counts.get("lost", 0) - 1)
    counts[run.outcome] = counts.get(run.outcome, 0) + 1
    return replace(state, last_run=newest, counts=counts, completed_tick=_completed(state, run))


def _completed(state: JobState, run: RunRecord) -> datetime | None:
    completed = state.completed_tick
    if run.outcome in ("succeeded", "failed") and (completed is None or run.tick > completed):
        return run.tick
    return completed
