"""The byte budget of a ScheduledJobGroup status, and how ``status.jobs`` is fitted into it.

etcd refuses a request above 1.5 MiB (its default ``--max-request-bytes``), and a custom resource
is stored whole, as JSON: metadata, spec and status in one value. A status that grows past what
is left makes every later status write fail (``etcdserver: request is too large``, a 500) and the
status stops for good. So the operator renders no status above :data:`STATUS_BUDGET`, 512 KiB,
which leaves about 1 MiB for the rest of the object: metadata (annotations are capped at
256 KiB by the API server, labels and ``managedFields`` are small) and the spec (at most 200
expected jobs, a few hundred bytes each: under 100 KiB, twice that with kubectl's
``last-applied-configuration``).

What is bounded by construction comes first and is never cut: leadership (leader, expiry, failover
history of at most 100 entries, 50 candidates, every identity at most 253 characters), conditions
and message. That is a few KiB for identities that are pod names, and under 400 KiB even with
every identity and message at its bound in characters Go writes as 6 bytes. The rest of the budget
goes to ``status.jobs``, whose length depends on how many job Leases carry the group's label,
which anyone allowed to write Leases in the namespace decides. When the jobs do not fit, in this
order:

1. each job keeps only its newest ``recentRuns``, as many as fit for every job alike (down to
   none; ``lastRun`` always stays);
2. jobs are left out, lowest priority first: the jobs ``spec.jobs`` expects come first (in spec
   order), then the others by their newest run (newest first), then those without a run (by
   name). ``status.jobsOmitted`` counts the jobs left out.

A status that fits is left as it is. Sizes are counted in bytes of compact UTF-8 JSON, never fewer
than Go's ``encoding/json`` writes (:func:`json_size`), which is what the API server stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Largest rendered status, in bytes of compact JSON (see the module's docstring for why).
STATUS_BUDGET = 512 * 1024


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON, never fewer than Go's ``encoding/json`` writes.

    Go escapes ``<``, ``>`` and ``&`` (6 bytes each instead of 1) and U+2028, U+2029 (6 instead
    of 3); a lone surrogate (3 bytes here) becomes U+FFFD (3 bytes).
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    html = text.count("<") + text.count(">") + text.count("&")
    separators = text.count("\u2028") + text.count("\u2029")
    return len(text.encode("utf-8", "surrogatepass")) + 5 * html + 3 * separators


@dataclass(frozen=True, slots=True)
class JobEntry:
    """One job's ``status.jobs`` entry, its ``recentRuns`` (oldest first) apart, and their sizes."""

    item: dict[str, Any]
    runs: tuple[dict[str, Any], ...]
    base: int
    run_sizes: tuple[int, ...]

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> JobEntry:
        runs = tuple(item.get("recentRuns") or ())
        bare = {**item, "recentRuns": []}
        return cls(bare, runs, json_size(bare), tuple(json_size(run) for run in runs))

    def size(self, keep: int) -> int:
        """Bytes of the entry with its ``keep`` newest runs."""
        kept = self.run_sizes[max(0, len(self.run_sizes) - keep) :]
        return self.base + sum(kept) + max(0, len(kept) - 1)

    def render(self, keep: int) -> dict[str, Any]:
        """The entry with its ``keep`` newest runs."""
        return {**self.item, "recentRuns": list(self.runs[max(0, len(self.runs) - keep) :])}


@dataclass(frozen=True, slots=True)
class FittedJobs:
    """The ``status.jobs`` entries that fit, and what was cut to make them fit."""

    jobs: list[dict[str, Any]]
    #: Recent runs each job kept, or None when no job lost any.
    runs_kept: int | None = None
    #: Jobs left out.
    omitted: int = 0

    @property
    def trimmed(self) -> bool:
        return self.runs_kept is not None or self.omitted > 0


def _total(entries: Sequence[JobEntry], keep: int) -> int:
    """Bytes of the entries in a JSON list, without its brackets."""
    return sum(entry.size(keep) for entry in entries) + max(0, len(entries) - 1)


def fit_jobs(entries: Iterable[JobEntry], count: int, room: int) -> FittedJobs:
    """The first of ``count`` ``entries`` (highest priority first) that fit in ``room`` bytes.

    ``entries`` is read only as far as entries can fit even without runs, so that a flood of job
    Leases costs no more than the budget holds. The entries are returned in the given order.
    """
    taken: list[JobEntry] = []
    floor = -1  # bytes of the taken entries without runs, with the commas between them
    for entry in entries:
        if floor + 1 + entry.base > room:
            break
        floor += 1 + entry.base
        taken.append(entry)
    most = max((len(entry.runs) for entry in taken), default=0)
    if len(taken) == count:
        for keep in range(most, 0, -1):
            if _total(taken, keep) <= room:
                kept = None if keep == most else keep
                return FittedJobs([entry.render(keep) for entry in taken], kept)
    return FittedJobs([entry.render(0) for entry in taken], 0 if most else None, count - len(taken))


def trimmed_note(fitted: FittedJobs, count: int) -> str:
    """What ``status.message`` and the ``Degraded`` condition say of a trimmed status."""
    parts = []
    if fitted.omitted:
        parts.append(f"{fitted.omitted} of {count} jobs left out (jobsOmitted)")
    if fitted.runs_kept:
        parts.append(f"recentRuns cut to the newest {fitted.runs_kept} per job")
    elif fitted.runs_kept is not None:
        parts.append("recentRuns left out (lastRun kept)")
    return f"status over its {STATUS_BUDGET // 1024} KiB budget: " + ", ".join(parts)
