"""The job simulation's ledger: what happened to every tick on every replica, for the checks.

The job replicas (:mod:`tests.sim.sim_jobs`) write into it as they claim, run, skip and release;
the checks (:mod:`tests.sim.sim_run`) judge it. Here too are the names both share: the job, its
Lease, and how long quiet skips may be the lock waiting out a hand edit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import pairwise

JOB_LEASE = "g.job"
JOB = "job"
#: how long after a hand edit or deletion of the job Lease quiet skips are the lock waiting it
#: out (rules 4, 5): twice the simulation's ``lock_at_most_for`` (15 s, ``sim_run``)
HAND_EDIT_WAIT = 30.0


class Ledger:
    """What happened to each tick (index ``k``: wall time ``T0 + k * period``)."""

    def __init__(self) -> None:
        self.runs: dict[int, list[tuple[int, int]]] = {}  # tick -> [(replica, token)]
        #: tick -> [(resourceVersion written, whether the grant created, what its replica saw)]
        self.grants: dict[int, list[tuple[int, bool, Callable[[int], bool]]]] = {}
        self.fates: dict[int, dict[int, str]] = {}  # tick -> replica -> why it did not run
        self.lost_recorded: set[int] = set()
        #: resourceVersions of the job Lease's deletions by hand (the ``job-delete`` fault)
        self.deletions: list[int] = []
        #: ticks run twice because a hand deletion erased the first claim (out of scope)
        self.across_deletion: list[str] = []
        self.violations: list[str] = []
        #: replica name -> whether it is running (or releasing) the grant with this token: the
        #: truth a ``held`` skip is checked against (issue 26: a skip for a holder that runs
        #: nothing is silent unless the skipping replica reports it)
        self.running: dict[str, Callable[[int], bool]] = {}
        #: replica name -> whether it holds an unanswered claim with this token that it can
        #: no longer settle (a LEADER job's replica that stopped leading; ``sim_leader``)
        self.unsettled: dict[str, Callable[[int], bool]] = {}
        #: when (true time) the job Lease was deleted or edited by hand
        self.hand_edits: list[float] = []
        #: resourceVersions the hand edits (not the deletions) of the job Lease wrote
        self.hand_edit_rvs: set[int] = set()
        #: tick -> how its run ended on the replica that ran it ("succeeded" or "lost")
        self.finished: dict[int, str] = {}
        #: tick -> the outcome the job Lease last recorded for it: its ``last-run`` from the
        #: store's change feed (what was written, whatever any replica saw), or a kept record
        #: its replica learned was written (counted, though a takeover's lost run recorded in
        #: the same write is the one shown as last)
        self.recorded: dict[int, str] = {}
        #: ticks whose succeeded or failed run some write recorded (a hand deletion may erase
        #: it, and a replica that saw the Lease held before then record the tick lost again)
        self.written_ok: set[int] = set()
        #: what the claims did: from the view / read first, 409s, reads after one, grants
        self.claims: Counter[str] = Counter()

    def granted(
        self,
        k: int,
        replica: int,
        token: int,
        rv: int,
        created: bool,
        saw: Callable[[int], bool],
    ) -> None:
        """Tick ``k`` granted to ``replica`` by the write that made ``rv``.

        A second grant is a violation, unless a hand deletion erased the first one: the second
        grant was a create, applied after a deletion that came after the first grant, by a
        replica that had seen neither the first grant nor any later write when it sent its own
        (``saw``). No conditional write can see a claim that a deletion erased: that is outside
        the safety model, counted apart. So is a third grant after a second deletion, and so
        on: each grant judged against the one the store applied before it."""
        runs = self.runs.setdefault(k, [])
        grants = self.grants.setdefault(k, [])
        runs.append((replica, token))
        grants.append((rv, created, saw))
        if len(runs) == 1:
            return
        # in the order the store applied them (answers may arrive the other way round)
        ordered = sorted(grants, key=lambda g: g[0])
        if all(
            later_created
            and not later_saw(first_rv)
            and any(first_rv < d < later_rv for d in self.deletions)
            for (first_rv, _, _), (later_rv, later_created, later_saw) in pairwise(ordered)
        ):
            # one entry a tick, however many grants it had
            self.across_deletion[:] = [
                a for a in self.across_deletion if not a.startswith(f"tick {k} ")
            ]
            self.across_deletion.append(
                f"tick {k} ran {len(runs)} times across hand deletions: {runs}"
            )
            return
        self.violations.append(f"tick {k} ran twice: {runs}")
