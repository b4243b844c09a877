"""One seeded simulation: replicas, a fault schedule, the checks, the figures.

Time alternates between chaos (``chaos`` seconds: latency up to 1.5 s, lost answers, 5xx bursts,
partitions, pauses past the lease, hand edits and deletions of the leader Lease, far-future
claims and deletions of the job Lease; with ``slow``, also spells of a slow but answering server,
round trips up to 1.2 times the latency the timing tolerates, each election request bounded by
its budget as the runner sets it) and calm (``calm`` seconds: everything healed). Checked
after every event, which covers every instant because belief only ends between events:

* at most one replica believes it leads;
* no tick of the job is granted (run) twice;
* within ``lease_duration + renew_deadline`` (+ one poll and the answer's latency) of the start of
  a calm window some replica leads;
* at the end, every tick was run, or is reported: a lost-run record, or a skip that the replica
  reports (dropped by the scheduler, API unavailable, lock held by the run before).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from k8slease.election.budgets import tolerated_latency
from k8slease.election.timing import ElectionTiming
from k8slease.lease.view import LeaseView
from k8slease.names import ANN_CLAIMED_TICK
from tests.sim.sim_core import MAX_DRIFT, T0, Clock, Faults, Network, Store, World
from tests.sim.sim_election import LEADER_LEASE, ElectionReplica
from tests.sim.sim_jobs import JobReplica
from tests.sim.sim_leader import LEADER_JOB, LeaderJobReplica
from tests.sim.sim_ledger import HAND_EDIT_WAIT, JOB_LEASE, Ledger

TIMING = ElectionTiming(lease_duration=10, renew_interval=2, renew_deadline=7, retry_interval=2)
PERIOD = 5.0
LOCK_AT_MOST_FOR = 15.0
assert HAND_EDIT_WAIT == 2 * LOCK_AT_MOST_FOR
#: a quiet `held` skip (DEBUG) is reported only when the holder was running that grant;
#: `held-silent` (a silent holder, WARNING), `adopted` (a late claim run first) and
#: `held-late-claim` (named by the holder's `lock.claim_applied_late` warning) are reported
REPORTED_SKIPS = {
    "dropped",
    "unavailable",
    "held",
    "running",
    "held-silent",
    "adopted",
    "held-late-claim",
}
#: a LEADER tick is also reported by a replica's leaderless watch, or by its runner when it
#: fires after the term ended (``job.ticks_being_lost``); ``not-leader`` (someone else leads,
#: as far as that replica saw) reports nothing
LEADER_REPORTED = REPORTED_SKIPS | {
    "no-leader",
    "leadership-ended",
    "watch-missed-warned",
    "held-not-started",
    "held-by-former-leader",
}
#: the open gaps: LEADER ticks lost without a report in known ways (``_leader_gap``)
LEADER_GAPS = {
    "watch-missed",
    "held-unsettled-ex-leader",
    "between-terms",
    "after-deletion",
    "after-holder-edit",
}


@dataclass
class Outcome:
    seed: int
    seconds: float
    events: int
    faults: Counter[str] = field(default_factory=Counter)
    terms: int = 0
    ticks: int = 0
    runs: int = 0
    skips: Counter[str] = field(default_factory=Counter)
    lost_recorded: int = 0
    #: ticks whose run succeeded and whose job Lease records them ``lost`` at the end, by why
    #: (``_succeeded_recorded_lost``)
    succeeded_recorded_lost: Counter[str] = field(default_factory=Counter)
    #: ticks run twice because a hand deletion erased the first claim (outside the model)
    across_deletion: list[str] = field(default_factory=list)
    claims: Counter[str] = field(default_factory=Counter)
    heal_times: list[float] = field(default_factory=list)
    #: the LEADER-class job (``leader_jobs``): its ticks' fates, starts, gates
    leader: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)


def simulate(
    seed: int,
    *,
    seconds: float = 600.0,
    replicas: int = 3,
    chaos: float = 60.0,
    calm: float = 40.0,
    job_edits: bool = True,
    claim_path: str = "ordered",
    slow: bool = False,
    late_applies: bool = False,
    leader_jobs: bool = False,
) -> Outcome:
    world = World(seed)
    rng = world.rng
    store = Store(world)
    faults = Faults()
    net = Network(world, store, faults, timeout=TIMING.request_timeout)
    clocks = [
        Clock(
            drift=rng.uniform(-MAX_DRIFT, MAX_DRIFT),
            offset=rng.uniform(0, 1e5),
            skew=rng.uniform(-1.0, 1.0),
        )
        for _ in range(replicas)
    ]
    electors = [ElectionReplica(i, world, net, clocks[i], TIMING) for i in range(replicas)]
    ledger = Ledger()
    common: dict[str, Any] = {
        "period": PERIOD,
        "lock_at_most_for": LOCK_AT_MOST_FOR,
        "claim_path": claim_path,
    }
    workers = [
        JobReplica(i, world, net, clocks[i], ledger, run_time=(0.1, 7.0), **common)
        for i in range(replicas)
    ]
    leader_ledger = Ledger()
    leader_workers: list[JobReplica] = []
    if leader_jobs:
        for i in range(replicas):
            worker = LeaderJobReplica(
                i, world, net, clocks[i], leader_ledger, run_time=(0.1, 4.0), job=LEADER_JOB,
                **common,
            )  # fmt: skip
            worker.bind(electors[i])
            leader_workers.append(worker)
    out = Outcome(seed=seed, seconds=seconds, events=0)

    def on_change(kind: str, lease: dict[str, Any]) -> None:
        name = lease["metadata"]["name"]
        if name == LEADER_LEASE:
            for elector in electors:
                elector.on_change(kind, lease)
            return
        if name == JOB_LEASE and kind != "DELETED":
            last = LeaseView.decode(lease).job.last_run
            if last is not None:
                k = int((last.tick - T0).total_seconds() // PERIOD)
                ledger.recorded[k] = last.outcome
                if last.outcome != "lost":
                    ledger.written_ok.add(k)
        for worker in [*workers, *leader_workers]:
            if worker.lease == name:
                worker.on_change(kind, lease)

    store.watchers.append(on_change)
    for e in electors:
        e.start()
    first_tick = 1
    for w in [*workers, *leader_workers]:
        w.start(first_tick)

    leaders: dict[str, Any] = {"current": None, "healing_since": None}
    heal_bound = (
        TIMING.lease_duration
        + TIMING.renew_deadline
        + 1.5 * TIMING.retry_interval
        + 2 * max(TIMING.request_timeout, 0.6 * tolerated_latency(TIMING))
    )

    leader_deletions: list[int] = []

    def across_deletion(believers: list[int]) -> str | None:
        """Two leaders because a hand deletion erased the first one's Lease: the later term
        began with a create, applied after a deletion that came after the earlier term's
        grant, sent by a replica that had seen neither that grant nor any later write. No
        conditional write can see a Lease that a deletion erased: outside the safety model,
        counted apart."""
        if len(believers) != 2:
            return None
        grants = [electors[i].grant for i in believers]
        if grants[0] is None or grants[1] is None:
            return None
        (first, _), (later, replica) = sorted(zip(grants, believers, strict=True))
        created, sent_at = later[1], later[2]
        erased = any(first[0] < d < later[0] for d in leader_deletions)
        seen_at = electors[replica].seen_at
        saw = any(seen_at.get(r, sent_at) < sent_at for r in range(first[0], later[0]))
        if created and erased and not saw:
            return f"leaders at rv {first[0]} and {later[0]}"
        return None

    def check() -> None:
        believers = [e.index for e in electors if e.believes()]
        if len(believers) > 1:
            erased = across_deletion(believers)
            if erased is None:
                out.violations.append(f"t={world.t:.3f}: two leaders {believers}")
            elif f"two leaders across a hand deletion: {erased}" not in out.across_deletion:
                out.across_deletion.append(f"two leaders across a hand deletion: {erased}")
        leader = believers[0] if believers else None
        if leader is not None and leader != leaders["current"]:
            out.terms += 1
            world.log(f"leader r{leader}")
        leaders["current"] = leader
        since = leaders["healing_since"]
        if since is not None:
            if leader is not None:
                out.heal_times.append(world.t - since)
                leaders["healing_since"] = None
            elif world.t - since > heal_bound:
                out.violations.append(f"t={world.t:.3f}: no leader {heal_bound:.1f}s after healing")
                leaders["healing_since"] = None

    def fault(kind: str, text: str = "") -> None:
        out.faults[kind] += 1
        world.log(f"fault {kind} {text}")

    def inject() -> None:
        if in_calm():
            return
        if late_applies and rng.random() < 0.1:
            # writes (and reads) applied after their callers timed out (issue 26)
            faults.late = rng.uniform(0.1, 0.6)
            fault("late-applies", f"{faults.late:.2f}")
            world.at(world.t + rng.uniform(2, 20), lambda: setattr(faults, "late", 0.0))
            world.at(world.t + rng.expovariate(1 / 3.0), inject)
            return
        choice = rng.random()
        if choice < (0.08 if slow else 0.15):
            faults.latency = rng.uniform(0.05, 1.5)
            fault("latency", f"{faults.latency:.2f}")
        elif choice < 0.15:
            # slow but answering: round trips up to 1.2 times the latency the timing tolerates,
            # well over request_timeout (what every request was once bounded by)
            faults.latency = rng.uniform(0.5, 0.6) * tolerated_latency(TIMING)
            fault("slow", f"{faults.latency:.2f}")
        elif choice < 0.25:
            faults.loss = rng.uniform(0, 0.3)
            fault("lost-answers", f"{faults.loss:.2f}")
        elif choice < 0.35:
            faults.errors = rng.uniform(0.2, 1.0)
            fault("5xx-burst", f"{faults.errors:.2f}")
            world.at(world.t + rng.uniform(1, 8), lambda: setattr(faults, "errors", 0.0))
        elif choice < 0.5:
            i = rng.randrange(replicas)
            if i not in faults.partitioned:
                fault("partition", f"r{i}")
                faults.partitioned.add(i)
                electors[i].set_watching(False, None)
                workers[i].break_watch()
                if leader_workers:
                    leader_workers[i].break_watch()
                world.at(world.t + rng.uniform(1, 30), lambda: heal(i))
        elif choice < 0.65:
            i = rng.randrange(replicas)
            length = rng.uniform(0.5, 25)
            fault("pause", f"r{i} {length:.1f}s")
            faults.paused_until[i] = max(faults.paused_until.get(i, 0.0), world.t + length)
        elif choice < 0.8:
            edit = rng.choice(["shorten", "drop-spec", "drop-holder", "delete"])
            if edit == "delete":
                done = store.delete(LEADER_LEASE)
                if done:
                    leader_deletions.append(store.rv)
            else:
                done = store.edit(LEADER_LEASE, _EDITS[edit])
            if done:
                fault(f"leader-{edit}")
        elif not job_edits:
            pass
        elif choice < 0.9:
            far = T0 + timedelta(days=rng.uniform(1, 30))
            if store.edit(JOB_LEASE, lambda lease: _claim(lease, far)):
                ledger.hand_edits.append(world.t)
                ledger.hand_edit_rvs.add(store.rv)
                fault("job-future-claim")
        else:
            if store.delete(JOB_LEASE):
                ledger.deletions.append(store.rv)
                ledger.hand_edits.append(world.t)
                fault("job-delete")
        world.at(world.t + rng.expovariate(1 / 3.0), inject)

    def heal(i: int) -> None:
        if i in faults.partitioned:
            faults.partitioned.discard(i)
            current = store.leases.get(LEADER_LEASE)
            electors[i].set_watching(True, None if current is None else dict(current))

    def in_calm() -> bool:
        return world.t % (chaos + calm) >= chaos

    def calm_down() -> None:
        faults.latency, faults.loss, faults.errors, faults.late = 0.05, 0.0, 0.0, 0.0
        for i in list(faults.partitioned):
            heal(i)
        for i in faults.paused_until:
            faults.paused_until[i] = min(faults.paused_until[i], world.t)
        for replica in [*electors, *workers, *leader_workers]:
            replica.resume()
        leaders["healing_since"] = world.t
        world.at(world.t + calm, lambda: world.at(world.t, inject))
        world.at(world.t + calm + chaos, calm_down)

    world.at(1.0, inject)
    world.at(chaos, calm_down)
    try:
        world.run_until(seconds, check)
    except Exception as exc:  # a crash of the real code is a finding too
        out.violations.append(f"t={world.t:.3f}: {type(exc).__name__}: {exc}")
    out.events = world.events
    out.violations.extend(ledger.violations)
    out.across_deletion.extend(ledger.across_deletion)
    out.claims.update(ledger.claims)
    last_tick = int((seconds - 2 * LOCK_AT_MOST_FOR - 2 * PERIOD) // PERIOD)
    _account(ledger, out, range(first_tick, last_tick))
    _succeeded_recorded_lost(ledger, workers, out, range(first_tick, last_tick))
    if leader_jobs:
        out.violations.extend(leader_ledger.violations)
        out.leader.update(leader_ledger.claims)
        for k in range(first_tick, last_tick):
            fates = leader_ledger.fates.get(k, {})
            if leader_ledger.runs.get(k):
                out.leader["tick run once"] += 1
            elif k in leader_ledger.lost_recorded:
                out.leader["tick lost and recorded"] += 1
            elif reported := [f for f in fates.values() if f in LEADER_REPORTED]:
                out.leader[f"tick skipped: {reported[0]}"] += 1
            elif gap := _leader_gap(fates):
                out.leader[f"OPEN GAP, lost unreported: {gap}"] += 1
            else:
                out.violations.append(f"LEADER tick {k}: not run and not reported ({fates})")
    out.trace = list(world.trace)
    for key, value in net.counts.items():
        out.faults[key] += value
    return out


def _succeeded_recorded_lost(
    ledger: Ledger, workers: list[JobReplica], out: Outcome, ticks: range
) -> None:
    """Issue 26: a run that succeeded is never left recorded ``lost``. At the end such a tick
    is one its replica still keeps the record of (to write at its next look), or one whose
    record was written and then erased by a hand deletion (a replica that saw the Lease held
    before it recorded the tick lost again: outside the model, like ``across_deletion``);
    any other is a violation."""
    kept = {w.lock._unwritten.tick for w in workers if w.lock._unwritten is not None}
    for k in ticks:
        if ledger.finished.get(k) != "succeeded" or ledger.recorded.get(k) != "lost":
            continue
        if T0 + timedelta(seconds=k * PERIOD) in kept:
            out.succeeded_recorded_lost["kept"] += 1
        elif k in ledger.written_ok:
            out.succeeded_recorded_lost["erased by a hand deletion"] += 1
        else:
            out.succeeded_recorded_lost["unwritten"] += 1
            out.violations.append(f"tick {k}: its run succeeded, recorded lost, never corrected")


def _leader_gap(fates: dict[int, str]) -> str | None:
    """The known ways a LEADER tick at which nobody ran it goes unreported (see
    docs/reliability.md), recognised exactly; ``None`` for anything else (a violation). The
    first three are closed in the code and the model (each comes back when its flag in
    :mod:`sim_leader` is turned off, see ``test_sim.py``); the last is closed but for a
    residue:

    * ``watch-missed``: the one replica that knew nobody led (it had stepped down on seeing a
      hand edit) was paused across the tick, so its leaderless watch missed it; every other
      replica still saw a Lease that someone might hold (``not-leader``). Closed: the miss is
      warned about (``watch-missed-warned``);
    * ``held-unsettled-ex-leader``: the leader skipped the tick quietly for a lock held by a
      claim that a former leader sent, got no answer for (yet), and did not settle. Closed but
      for a residue: the ex-leader settles it when its term ends (``termsettle``) and the skip
      is at WARNING once the holder's ``renewTime`` is old; left: an ex-leader cut off from the
      server past its settling's bound whose claim landed less than that age before the skip;
    * ``between-terms``: the tick came due on a replica between two terms (its take in flight,
      in a pause), so its entry was paused, and its leaderless watch judged only after the new
      term began. Closed: the new term's catch-up claims it, and its outcome replaces this fate
      (run, or reported: ``dropped`` while the replica's previous grant is held,
      ``leadership-ended`` once the term is over, or the claim's own report). The last ones
      (soak seeds 8020, 8061, 8088, 8091) were a catch-up the model gave up while the previous
      run was releasing (the code claims: modelled now), and a catch-up whose read of the job's
      state failed, which the code gave up (it now claims the newest tick within grace all the
      same, ``CATCH_UP_WITHOUT_STATE``);
    * ``after-deletion``: within the wait of a held leader Lease deleted by hand, the Lease
      absent or back (a create applied late) naming someone: nobody led, and no replica could
      tell, not even the deleted Lease's holder (it may see a Lease naming another that may
      lead): the LEADER twin of a hand deletion between two creates, outside the safety model.
      Closed but for a residue: the replica the Lease came back naming reports the tick
      (``nobody_leads``: a Lease naming it that it does not lead on); left, the ticks before
      it has seen that Lease;
    * ``after-holder-edit``: a hand edit took the holder out of the leader Lease less than a
      belief (``(renew_deadline + lease_duration) / 2``) after a holder's write that the
      replicas saw: that holder may still run the tick until it sees the edit, so nobody
      reports it (``nobody_leads``'s documented limit). Found by the soak of 2026-12-03 (seed
      20031): a candidate's create, applied after it gave up on it, then the edit; nobody led,
      and its own sender never saw its name in the Lease. Open, outside the safety model like
      every hand edit.

    Every other replica: ``not-leader``.
    """
    kinds = set(fates.values())
    gaps = kinds & LEADER_GAPS
    if gaps and kinds <= LEADER_GAPS | {"not-leader"}:
        return "+".join(sorted(gaps))
    return None


def _account(ledger: Ledger, out: Outcome, ticks: range) -> None:
    """Every tick of the job was run, recorded lost, or skipped with a report."""
    for k in ticks:
        out.ticks += 1
        if ledger.runs.get(k):
            out.runs += 1
            continue
        if k in ledger.lost_recorded:
            out.lost_recorded += 1
            continue
        fates = ledger.fates.get(k, {})
        reported = [f for f in fates.values() if f in REPORTED_SKIPS]
        fired = k * PERIOD
        # within the wait of a hand edit: from the edit, or from when a replica that skipped
        # quietly first saw it (a partition or a pause can delay that)
        after_edit = (
            any(fired - HAND_EDIT_WAIT <= t <= fired + PERIOD for t in ledger.hand_edits)
            or "held-quiet-after-seen-edit" in fates.values()
        )
        if reported:
            out.skips[reported[0]] += 1
        elif (
            fates
            and after_edit
            and set(fates.values())
            <= {"held-quiet", "held-quiet-after-seen-edit", "already-claimed", "lost-race"}
        ):
            # the lock waited out a Lease deleted or edited by hand while held (rules 4, 5)
            out.skips["held-after-hand-edit"] += 1
        else:
            out.violations.append(f"tick {k}: not run and not reported ({fates})")


def _claim(lease: dict[str, Any], tick: Any) -> None:
    lease["metadata"].setdefault("annotations", {})[ANN_CLAIMED_TICK] = tick.strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )


def _shorten(lease: dict[str, Any]) -> None:
    if isinstance(lease.get("spec"), dict):
        lease["spec"]["leaseDurationSeconds"] = 1


def _drop_spec(lease: dict[str, Any]) -> None:
    lease.pop("spec", None)


def _drop_holder(lease: dict[str, Any]) -> None:
    if isinstance(lease.get("spec"), dict):
        lease["spec"].pop("holderIdentity", None)


_EDITS = {"shorten": _shorten, "drop-spec": _drop_spec, "drop-holder": _drop_holder}
