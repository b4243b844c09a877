"""The job-lock part of a Lease: claimed and completed ticks, the last run and run counts.

A per-job lock is a Lease (``<group>.<job>``, labelled ``k8slease.io/role=job``) whose spec is an
ordinary :class:`~k8slease.LeaseRecord`; what is specific to jobs lives in annotations so
that the tick claim travels in the same conditional write as the grant. This module holds the
pure converters; like :mod:`k8slease.lease.record` it never raises on a Lease's content and lists
what was malformed instead.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from k8slease.kube.microtime import format_microtime, parse_microtime, time_field
from k8slease.lease.meta import annotations_of
from k8slease.lease.record import FENCING_TOKEN_MAX, shown
from k8slease.names import ANN_CLAIMED_TICK, ANN_COMPLETED_TICK, ANN_LAST_RUN, ANN_RUN_COUNTS

Outcome = Literal["succeeded", "failed", "lost"]
OUTCOMES: tuple[Outcome, ...] = ("succeeded", "failed", "lost")
#: The most a run count can be (int64, what the operator's status stores); it saturates there.
COUNT_MAX = 2**63 - 1
#: The longest holder a run record keeps (an identity is a DNS name plus a suffix: far less).
MAX_RECORD_HOLDER = 512


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job: who ran which tick, when, and how it ended.

    ``outcome`` is ``succeeded``, ``failed`` (the job raised) or ``lost`` (the lock could not be
    kept while the job ran, so another replica may have taken over).
    """

    holder: str
    tick: datetime
    started: datetime
    finished: datetime
    outcome: Outcome
    fencing_token: int
    error: str | None = None

    def to_json(self) -> str:
        """The record as the ``last-run`` annotation holds it; strings cut so that it always
        fits an annotation (a holder a hand edit made a megabyte long included)."""
        data: dict[str, Any] = {
            "holder": _cut(self.holder, MAX_RECORD_HOLDER),
            "tick": format_microtime(self.tick),
            "started": format_microtime(self.started),
            "finished": format_microtime(self.finished),
            "outcome": self.outcome,
            "fencingToken": min(max(self.fencing_token, 0), FENCING_TOKEN_MAX),
        }
        if self.error:
            data["error"] = _cut(self.error, 500)
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """Parse a run record; raises ``ValueError`` naming what is wrong, nothing else."""
        data = _json_object(text, "last-run")
        outcome = data.get("outcome")
        if not isinstance(outcome, str) or outcome not in OUTCOMES:
            raise ValueError(f"last-run outcome is not one of {OUTCOMES}: {shown(outcome)}")
        holder = data.get("holder")
        token = data.get("fencingToken", 0)
        if not isinstance(holder, str) or isinstance(token, bool) or not isinstance(token, int):
            raise ValueError("last-run holder or fencingToken has the wrong type")
        if not 0 <= token <= FENCING_TOKEN_MAX:
            raise ValueError(f"last-run fencingToken is not in 0..{FENCING_TOKEN_MAX}")
        error = data.get("error")
        return cls(
            holder=holder,
            tick=parse_microtime(data.get("tick")),
            started=parse_microtime(data.get("started")),
            finished=parse_microtime(data.get("finished")),
            outcome=outcome,
            fencing_token=token,
            error=error if isinstance(error, str) else None,
        )


def count_up(counts: Mapping[str, int], outcome: Outcome) -> dict[str, int]:
    """``counts`` with one more ``outcome``; a count at :data:`COUNT_MAX` stays there."""
    updated = dict(counts)
    updated[outcome] = min(updated.get(outcome, 0) + 1, COUNT_MAX)
    return updated


def _json_object(text: object, name: str) -> dict[str, Any]:
    """``text`` parsed as a JSON object; ``ValueError`` for anything else (never another error:
    JSON nested deeper than the interpreter's recursion limit included)."""
    if not isinstance(text, str):
        raise ValueError(f"{name} is not a string: {shown(text)}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError(f"{name} is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name} is not a JSON object")
    return data


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class JobState:
    """What a job lock Lease says about the job's ticks and runs."""

    claimed_tick: datetime | None = None
    completed_tick: datetime | None = None
    last_run: RunRecord | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def count(self, outcome: Outcome) -> int:
        return int(self.counts.get(outcome, 0))


def job_state_from_lease(lease: Mapping[str, Any]) -> JobState:
    """Read the job annotations of a lock Lease. Never raises on the Lease's content."""
    annotations = annotations_of(lease)
    problems: list[str] = []

    def tick(key: str) -> datetime | None:
        return time_field(annotations.get(key), key, problems)

    last_run = None
    raw_run = annotations.get(ANN_LAST_RUN)
    if raw_run is not None:
        try:
            last_run = RunRecord.from_json(raw_run)
        except ValueError as exc:
            problems.append(f"{ANN_LAST_RUN}: {exc}")
    counts: dict[str, int] = {}
    raw_counts = annotations.get(ANN_RUN_COUNTS)
    if raw_counts is not None:
        try:
            parsed = _json_object(raw_counts, ANN_RUN_COUNTS)
        except ValueError:
            problems.append(f"{ANN_RUN_COUNTS}: not a JSON object of counts")
            parsed = {}
        for key, value in parsed.items():
            if key in OUTCOMES and isinstance(value, int) and not isinstance(value, bool):
                if value > COUNT_MAX:
                    problems.append(f"{ANN_RUN_COUNTS}: {key} is greater than {COUNT_MAX}")
                counts[key] = min(max(0, value), COUNT_MAX)
    return JobState(
        claimed_tick=tick(ANN_CLAIMED_TICK),
        completed_tick=tick(ANN_COMPLETED_TICK),
        last_run=last_run,
        counts=counts,
        problems=tuple(problems),
    )


def lease_with_job_state(lease: Mapping[str, Any], state: JobState) -> dict[str, Any]:
    """Return a copy of ``lease`` with ``state`` written into its annotations; others are kept."""
    body: dict[str, Any] = copy.deepcopy(dict(lease))
    metadata = body.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    annotations = metadata.get("annotations")
    annotations = dict(annotations) if isinstance(annotations, dict) else {}
    for key, value in (
        (ANN_CLAIMED_TICK, state.claimed_tick),
        (ANN_COMPLETED_TICK, state.completed_tick),
    ):
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = format_microtime(value)
    if state.last_run is None:
        annotations.pop(ANN_LAST_RUN, None)
    else:
        annotations[ANN_LAST_RUN] = state.last_run.to_json()
    if state.counts:
        annotations[ANN_RUN_COUNTS] = json.dumps(dict(sorted(state.counts.items())))
    else:
        annotations.pop(ANN_RUN_COUNTS, None)
    metadata["annotations"] = annotations
    body["metadata"] = metadata
    return body
