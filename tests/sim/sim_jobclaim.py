"""A job replica's claim of a tick in the simulation: the real lock's judgement and its write.

A claim is judged with the real ``JobLock._judge`` (:func:`~k8slease.jobs.lockrules.judge_claim`
on a snapshot of the replica's real :class:`~k8slease.lease.observe.Observations`); a refused
claim's fate is recorded for the checks, a granted one written as ``JobLock._write_claim`` does:
one conditional write (PUT on the resourceVersion and uid it judged on, or a create), whose
answer is a grant (its run starts: ``sim_jobrun``), a lost race, or none (the claim is pending,
settled before the next claim: ``sim_jobs``). When a replica claims, and how it waits its turn,
is ``sim_jobs``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from k8slease.errors import AlreadyExists, Conflict, NotFound, TransportError, Unavailable
from k8slease.jobs.lock import _Judged
from k8slease.jobs.lockrules import Verdict
from k8slease.jobs.unsettled import PendingClaim, still_pending
from k8slease.lease.jobrecord import lease_with_job_state
from k8slease.lease.record import lease_with_record, new_lease
from k8slease.lease.view import LeaseView
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB
from tests.sim.sim_core import T0
from tests.sim.sim_jobrun import RunningReplica, _Run
from tests.sim.sim_ledger import HAND_EDIT_WAIT


class ClaimingReplica(RunningReplica):
    """A job replica's claims: judged on the real lock's rules, written conditionally."""

    # set by JobReplica.__init__ (sim_jobs)
    claim_path: str
    claim_timeout: float
    in_flight: int | None
    pending: PendingClaim | None
    pending_meta: tuple[int, int, bool]

    def _fate(self, k: int, why: str) -> None:
        self.ledger.fates.setdefault(k, {}).setdefault(self.index, why)

    def _skip(self, k: int, why: str) -> None:
        self.busy = False
        self._fate(k, why)

    def _read_then(
        self, k: int, then: Callable[[LeaseView | None], None]
    ) -> Callable[[dict[str, Any] | None, TransportError | None], None]:
        """The answer to a read for tick ``k``: an error other than NotFound skips the tick
        (unavailable); otherwise the Lease (or its absence) is seen and ``then`` gets its view."""

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is not None and not isinstance(error, NotFound):
                self._skip(k, "unavailable")
                return
            self.see(lease)
            then(None if lease is None else LeaseView.decode(lease))

        return answer

    def _judge(self, k: int, lease: LeaseView | None) -> _Judged:
        seen = self.observations.current(self.lease)
        judged = self.lock._judge(lease, seen, self._tick(k), reclaim_own=False)
        record = judged.record
        self.world.log(
            f"r{self.index}{self.tag} judges tick {k}: {judged.claim.verdict.value} "
            f"{judged.claim.detail} "
            f"(seen {'absent' if lease is None else lease.resource_version}, "
            f"token {None if record is None else record.fencing_token})"
        )
        return judged

    def _why(self, judged: _Judged) -> str:
        """The fate of a refused claim. A ``held`` skip is reported (WARNING) when the lock
        reports a silent holder; else it is a quiet (DEBUG) skip, which the checks accept only
        when the holder really is running (or releasing) that grant."""
        verdict = judged.claim.verdict
        if verdict is not Verdict.HELD:
            return verdict.value
        if judged.silent is not None:
            return "held-silent"
        record = judged.record
        running = None if record is None else self.ledger.running.get(record.holder)
        if record is not None and running is not None and running(record.fencing_token):
            return "held"
        if any(
            self.world.t - HAND_EDIT_WAIT <= at <= self.world.t
            for at in self.saw_hand_edit.values()
        ):
            return "held-quiet-after-seen-edit"  # waiting out what it saw (rules 4, 5)
        return "held-quiet"

    def _write_claim(
        self,
        k: int,
        lease: LeaseView | None,
        judged: _Judged,
        *,
        on_lost_race: Callable[[int], None],
        after_409: bool = False,
    ) -> None:
        """``JobLock._write_claim``: conditional on ``lease`` (create when ``None``)."""
        claim = judged.claim
        assert claim.record is not None and claim.state is not None
        state = claim.state
        if lease is None:
            body = new_lease(
                self.lease,
                "sim",
                claim.record,
                labels={LABEL_GROUP: "g", LABEL_ROLE: ROLE_JOB, LABEL_JOB: self.job},
            )
            op = lambda s: s.create(lease_with_job_state(body, state))  # noqa: E731
        else:
            body = lease_with_job_state(lease_with_record(lease.body, claim.record), state)
            op = lambda s: s.replace(self.lease, body)  # noqa: E731
        if self.claim_path == "unconditional":  # a hole put in on purpose (test_sim.py)
            written = lease_with_job_state(body, state)
            op = lambda s: _overwrite(s, written)  # noqa: E731
        sent = self.mono()
        sent_wall = self.clock.wall(self.world.t)
        sent_event = self.world.events
        lost_tick = claim.lost_tick
        token = claim.record.fencing_token
        created = lease is None
        self.in_flight = token

        def answer(result: dict[str, Any] | None, error: TransportError | None) -> None:
            self.in_flight = None
            self.world.log(f"r{self.index}{self.tag} claim of tick {k}: {error or 'granted'}")
            if isinstance(error, AlreadyExists | Conflict | NotFound):
                self.ledger.claims["409"] += 1
                on_lost_race(k)
            elif error is not None or result is None:
                if isinstance(error, Unavailable):  # JobLock._write_claim: settled later
                    earlier = self.pending
                    self.pending = still_pending(
                        earlier,
                        PendingClaim(
                            tick=self._tick(k),
                            fencing_token=token,
                            resource_version="" if lease is None else lease.resource_version,
                            sent_mono=sent,
                            sent_wall=sent_wall,
                            carried=judged.carried,
                        ),
                    )
                    if earlier is None:
                        self.pending_meta = (k, sent_event, created)
                self._skip(k, "unavailable")
            else:
                self.pending = None
                if judged.carried is not None:
                    self._recorded(judged.carried)
                self.lock._highest_token = max(self.lock._highest_token, token)
                self.ledger.claims["granted-after-409" if after_409 else "granted"] += 1
                self._granted(k, result, sent, lost_tick, created, sent_event)

        self._ask(
            op,
            answer,
            late_ok=True,
            timeout=self.claim_timeout,
        )

    def _granted(
        self,
        k: int,
        lease: dict[str, Any],
        sent: float,
        lost_tick: Any,
        created: bool,
        sent_event: int,
    ) -> None:
        self.see(lease)
        view = LeaseView.decode(lease)
        if lost_tick is not None:
            self.ledger.lost_recorded.add(int((lost_tick - T0).total_seconds() // self.period))
        rv = int(view.resource_version)

        def saw(first: int) -> bool:
            """Whether, before sending, this replica saw the first grant or anything after it."""
            return any(self.seen_at.get(r, sent_event) < sent_event for r in range(first, rv))

        def record() -> None:
            self.ledger.granted(k, self.index, view.fencing_token, rv, created, saw)

        self._start(_Run(k=k, view=view, last_ok=sent, started=self.world.t), record)


def _overwrite(store: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A claim write without its condition: last writer wins (never what the lock does)."""
    name = body["metadata"]["name"]
    current = store.leases.get(name)
    if current is None:
        return store.create(body)  # type: ignore[no-any-return]
    body = {**body, "metadata": {**body["metadata"], **current["metadata"]}}
    return store.replace(name, body)  # type: ignore[no-any-return]
