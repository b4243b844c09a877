"""The deterministic simulation in CI: a bounded set of seeds, and proof that it finds a hole."""

from __future__ import annotations

import pytest

from tests.sim.sim_report import Coverage, replay_text
from tests.sim.sim_run import simulate

SECONDS = 600.0
SEEDS = range(10)


@pytest.fixture
def without_corrections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model as it was when the seeds a test names were found: without the correction
    write of a kept run record (``sim_jobs.WRITE_CORRECTIONS``, 2026-12-03), which changes a
    run's course and so which seed shows what. The checks themselves are the same."""
    from tests.sim import sim_jobs

    monkeypatch.setattr(sim_jobs, "WRITE_CORRECTIONS", False)


@pytest.mark.timeout(300)  # about 5 s on an idle core
def test_bounded_seeds_keep_one_leader_one_run_per_tick_and_report_every_lost_tick() -> None:
    coverage = Coverage()
    for seed in SEEDS:
        out = simulate(seed, seconds=SECONDS)
        assert not out.violations, replay_text(out, SECONDS)
        coverage.add(out)
    print(coverage.render())
    assert coverage.faults["pause"] > 0 and coverage.faults["partition"] > 0
    assert coverage.terms > len(SEEDS), "faults made leadership change"
    assert coverage.runs > coverage.ticks / 3


@pytest.mark.timeout(300)
def test_slow_but_answering_spells_keep_one_leader_and_leaders_hold_through_them() -> None:
    """Spells where round trips take up to 1.2 times the tolerated latency (over
    request_timeout, which once bounded every request): the same checks hold."""
    coverage = Coverage()
    for seed in SEEDS:
        out = simulate(seed, seconds=SECONDS, slow=True)
        assert not out.violations, replay_text(out, SECONDS)
        coverage.add(out)
    assert coverage.faults["slow"] > 0
    assert coverage.terms > len(SEEDS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [1006, 2016, 2020, 2048, 5019])
def test_soak_seeds_that_failed_once_stay_fixed(seed: int) -> None:
    """Seeds that failed while the claim path was brought into the simulation (3600 s each, cut
    after the failure): 2020 and 5019 ran a tick twice (a far-future claim, set aside as
    suspect, hid a claim seen before a deletion / that it overwrote; fixed by
    ``judge_claim(seen_claimed=...)``); 2048 ran one twice across a hand
    deletion (counted apart, not a violation); 1006 and 2016 lost a tick unreported (the model
    recorded a lost race where the lock's re-judgement after its 409 said held)."""
    seconds = {1006: 2450.0, 2016: 3500.0, 2020: 300.0, 2048: 2300.0, 5019: 2160.0}[seed]
    out = simulate(seed, seconds=seconds)
    assert not out.violations, replay_text(out, seconds)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("claim_path", ["ordered", "read-first"])
def test_both_claim_paths_alone_keep_one_run_per_tick(claim_path: str) -> None:
    """Every replica on one path: the informer's view (turn in the claim order, a read only
    after a 409), or a read before every claim (the lock while its informer is not synced)."""
    for seed in range(3):
        out = simulate(seed, seconds=SECONDS, claim_path=claim_path)
        assert not out.violations, replay_text(out, SECONDS)


def test_a_seed_replays_exactly() -> None:
    first, second = simulate(3, seconds=200), simulate(3, seconds=200)
    assert first.trace == second.trace and first.events == second.events


@pytest.mark.timeout(300)
def test_the_simulation_finds_the_hand_edit_hole_when_it_is_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Put back the rules before issue 15 (a record's own shortened duration honoured, a
    holder-less Lease free): some seed must report two leaders."""
    import k8slease.lease.rules as rules

    def old_duration(record, fallback):  # type: ignore[no-untyped-def]
        if record.malformed or record.duration_seconds <= 0:
            return max(float(record.duration_seconds), float(fallback))
        return float(record.duration_seconds)

    monkeypatch.setattr(rules, "effective_duration", old_duration)
    monkeypatch.setattr(rules, "is_release", lambda r: not r.malformed and not r.held)
    # seeds 0 and 13 of the first 16 found it while every request was bounded by
    # request_timeout; with request budgets (issue 22) seed 0's interleaving no longer arises
    found = [simulate(seed, seconds=SECONDS).violations for seed in (*range(6), 13)]
    assert any(any("two leaders" in v for v in found_) for found_ in found)


@pytest.mark.timeout(300)
def test_the_simulation_finds_a_double_tick_when_the_claim_write_is_not_conditional() -> None:
    """The claim path of issue 16 without its conditional write (last writer wins): some seed
    must report a tick run twice."""
    found = [simulate(seed, seconds=SECONDS, claim_path="unconditional") for seed in range(3)]
    assert any(any("ran twice" in v for v in out.violations) for out in found)


@pytest.mark.timeout(300)
def test_the_simulation_finds_a_double_tick_when_the_claimed_tick_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``judge_claim`` as the lock calls it, blind to claimed ticks (the Lease's and those the
    replica saw): a replica whose scheduler fires late claims a tick another already ran. Some
    seed must report it."""
    import dataclasses

    import k8slease.jobs.lock as lock

    judge = lock.judge_claim

    def blind(record, state, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["seen_claimed"] = None  # nor the claimed ticks this replica remembers
        return judge(record, dataclasses.replace(state, claimed_tick=None), **kwargs)

    monkeypatch.setattr(lock, "judge_claim", blind)
    found = [simulate(seed, seconds=SECONDS).violations for seed in range(3)]
    assert any(any("ran twice" in v for v in violations) for violations in found)


@pytest.mark.timeout(300)
def test_writes_applied_after_their_timeout_skip_no_tick_silently() -> None:
    """Issue 26: job Lease writes that reach the store after their caller timed out. The next
    look settles each one: a claim found applied is run (within its grace) or released with the
    tick recorded lost; a finished run's record is kept and written later; replicas skipping a
    silent holder report it. No tick may be lost without a report, and no tick run twice."""
    coverage = Coverage()
    for seed in SEEDS:
        out = simulate(seed, seconds=SECONDS, late_applies=True)
        assert not out.violations, replay_text(out, SECONDS)
        coverage.add(out)
    print(coverage.render())
    assert coverage.faults["late-apply"] > 0
    assert coverage.claims["late-claim-run"] > 0 and coverage.claims["late-claim-released"] > 0
    # a takeover's lost record of a run that succeeded, corrected at its replica's next look
    assert coverage.claims["kept-record-corrected"] > 0


@pytest.mark.timeout(300)
def test_the_simulation_finds_a_succeeded_run_left_recorded_lost_when_kept_records_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check behind "a run that succeeded is never recorded lost" (issue 26) sees a kept
    record dropped unwritten: with every kept record taken as already in the Lease (neither
    carried by a claim nor written as a correction), some succeeded tick stays recorded lost."""
    from k8slease.jobs import lock
    from tests.sim import sim_jobs

    def nothing_to_write(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr(lock, "merge_run", nothing_to_write)
    monkeypatch.setattr(sim_jobs, "merge_run", nothing_to_write)
    found = [simulate(seed, seconds=SECONDS, late_applies=True) for seed in SEEDS]
    assert any(any("recorded lost, never corrected" in v for v in out.violations) for out in found)


@pytest.mark.usefixtures("without_corrections")
@pytest.mark.timeout(300)
def test_the_simulation_finds_silent_skips_when_late_claims_are_not_settled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lock before issue 26: a claim whose answer did not arrive is forgotten (the replica
    skips its own Lease as "held by" itself) and nobody reports a silent holder. Some seed must
    report a tick not run and not reported."""
    import k8slease.jobs.lock as lock
    from k8slease.jobs.unsettled import Settled
    from tests.sim import sim_jobs

    monkeypatch.setattr(sim_jobs, "settle_claim", lambda *args, **kwargs: Settled.REFUSED)
    monkeypatch.setattr(lock, "silent_holder", lambda *args, **kwargs: False)
    # seeds where late applies land on claims (with request budgets, late answers are rarer)
    found = [simulate(seed, seconds=SECONDS, late_applies=True) for seed in range(6, 12)]
    assert any(any("not reported" in v for v in out.violations) for out in found)


@pytest.mark.timeout(300)
def test_leader_jobs_start_only_while_leading_and_every_leaderless_tick_is_reported() -> None:
    """Issue 26's done-when, in the simulation: a LEADER-class job on every replica, through the
    real gate (``bind_to_leadership``, checked after the claim write and the hop to the loop) and
    the real leaderless watch (``nobody_leads``), with slow, lost and late-applied writes. No
    LEADER run starts on a replica that is not leading (judged on its election machine at the
    instant of the start); every LEADER tick runs, is recorded lost, or is reported, but for
    the two open gaps, counted on their own (docs/reliability.md)."""
    coverage = Coverage()
    for seed in SEEDS:
        out = simulate(seed, seconds=SECONDS, late_applies=True, leader_jobs=True)
        assert not out.violations, replay_text(out, SECONDS, flags=" --late-applies --leader-jobs")
        coverage.add(out)
    print(coverage.render())
    leader = coverage.leader
    assert leader["leader-started"] > 0 and leader["leader-not-started"] > 0
    assert leader["leader-told-lost"] > 0
    assert leader["tick skipped: no-leader"] > 0 and leader["tick skipped: leadership-ended"] > 0


@pytest.mark.timeout(300)
def test_the_simulation_finds_a_leader_run_outside_leadership_when_the_gate_is_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The LEADER gate taken out (the run starts once the claim is granted, as before issue
    26): some seed must report a LEADER run started on a replica that is not leading."""
    from tests.sim import sim_leader

    monkeypatch.setattr(sim_leader, "bind_to_leadership", lambda grant, is_leader: None)
    found = [
        simulate(seed, seconds=SECONDS, late_applies=True, leader_jobs=True) for seed in (0, 1)
    ]
    assert any(any("which is not leading" in v for v in out.violations) for out in found)


def _leader_gaps(seed: int, seconds: float = SECONDS) -> dict[str, int]:
    """The open gaps (LEADER ticks lost unreported) of ``seed``, and the ex-leader's releases;
    fails on any violation."""
    out = simulate(seed, seconds=seconds, late_applies=True, leader_jobs=True)
    assert not out.violations, replay_text(out, seconds, flags=" --late-applies --leader-jobs")
    found = {k.split(": ")[1]: v for k, v in out.leader.items() if "OPEN GAP" in k}
    return found


@pytest.mark.timeout(300)
def test_an_ex_leader_settles_its_unanswered_leader_claim_so_no_tick_is_skipped_unreported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeds 4 and 7 (600 s) lost LEADER ticks without a report: the new leader skipped them
    at DEBUG for a lock held by a claim a former leader had sent without an answer and, its
    LEADER entry paused, never settled (``held-unsettled-ex-leader``). The ex-leader now settles
    the claim when its term ends (``termsettle``): released, never run, the span named at
    WARNING. Shown with the other measures that also cover these seeds now taken out (the new
    term's catch-up, the holder's old ``renewTime``, the leader's ``held-by-former-leader``
    report): the gap comes back without it."""
    import k8slease.jobs.lock
    from tests.sim import sim_leader

    monkeypatch.setattr(sim_leader, "CATCH_UP", False)
    monkeypatch.setattr(k8slease.jobs.lock, "_age", lambda when, now: None)
    monkeypatch.setattr(sim_leader, "HELD_WHILE_LEADING_REPORTED", False)
    assert [_leader_gaps(seed) for seed in (4, 7)] == [{}, {}]
    monkeypatch.setattr(sim_leader, "AFTER_TERM_SETTLES", False)
    assert all("held-unsettled-ex-leader" in _leader_gaps(seed) for seed in (4, 7))


@pytest.mark.usefixtures("without_corrections")
@pytest.mark.timeout(300)
def test_a_claim_applied_long_after_it_was_sent_is_reported_from_the_first_skip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 8002 (3600 s), tick 151: an ex-leader's LEADER claim, sent at 721 s, timed out, its
    sender then cut off past the after-term settling's bound; the claim landed late and the new
    leader skipped tick 151 at DEBUG (``held-unsettled-ex-leader``). The holder's ``renewTime``
    was 29 s old: the skip is now at WARNING (``silent_holder(renewed_ago=...)``). Shown on seed
    8023 (8015 once the model's leader-Lease watch was ordered, 8023 since a read overtaken by
    the watch is read again): with the leader's ``held-by-former-leader`` report also taken
    out, the gap comes back without the ``renewTime`` clause."""
    import k8slease.jobs.lock
    from tests.sim import sim_leader

    monkeypatch.setattr(sim_leader, "CATCH_UP", False)
    assert _leader_gaps(8023, 3600.0) == {}
    monkeypatch.setattr(sim_leader, "HELD_WHILE_LEADING_REPORTED", False)
    assert _leader_gaps(8023, 3600.0) == {}
    monkeypatch.setattr(k8slease.jobs.lock, "_age", lambda when, now: None)
    assert "held-unsettled-ex-leader" in _leader_gaps(8023, 3600.0)


@pytest.mark.usefixtures("without_corrections")
@pytest.mark.timeout(300)
def test_a_leader_that_finds_its_lock_held_by_a_former_leader_reports_the_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 8119 (3600 s), tick 491: r2 led, claimed tick 488 and was paused 10.6 s; r1 took
    over; r2's claim, sent on resuming, was granted after its term (not started), and r1
    skipped tick 491 as held by r2, at DEBUG: nobody ran it, nobody said so. The leader's runner
    now reports a LEADER tick held by another replica (``held-by-former-leader``). Taken out,
    a seed fails again: 8268 (tick 473) since the new term's catch-up is modelled as the code
    runs it (8119 before)."""
    from tests.sim import sim_leader

    assert [_leader_gaps(seed, 3600.0) for seed in (8119, 8268)] == [{}, {}]
    monkeypatch.setattr(sim_leader, "HELD_WHILE_LEADING_REPORTED", False)
    out = simulate(8268, seconds=3600.0, late_applies=True, leader_jobs=True)
    assert any("LEADER tick 473: not run and not reported" in v for v in out.violations)


@pytest.mark.usefixtures("without_corrections")
@pytest.mark.timeout(300)
def test_a_leaderless_watch_missed_in_a_stall_is_warned_so_no_tick_is_lost_unreported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeds 0 and 3 (600 s) lost LEADER ticks without a report: the one replica that knew
    nobody led (it had stepped down on seeing a hand edit) was paused across the tick, so its
    leaderless watch missed it past its grace (``watch-missed``). The miss is now warned about
    (``DroppedTicks(watches=...)``). Taken out, the gap comes back: on seeds 4 and 8 since the
    new term's catch-up is modelled as the code runs it (5 and 8 since a read overtaken by the
    watch is read again, 0 and 4 after the model's leader-Lease watch was ordered, 0 and 3
    before)."""
    from tests.sim import sim_leader

    assert [_leader_gaps(seed) for seed in (4, 8)] == [{}, {}]
    monkeypatch.setattr(sim_leader, "WATCH_MISSES_WARNED", False)
    assert all("watch-missed" in _leader_gaps(seed) for seed in (4, 8))


@pytest.mark.usefixtures("without_corrections")
@pytest.mark.timeout(300)
def test_a_lease_back_after_a_deletion_is_reported_by_the_replica_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 8025 (3600 s), tick 369: r2 led, a hand deletion, then r1's create, given up on
    before, was applied. r1 waited out a Lease naming itself (rule 4), r2 and r0 saw a Lease
    naming r1 that r1 might lead on: nobody led and nobody said so (``after-deletion``). r1
    now reports the tick (``nobody_leads``: a Lease naming it that it does not lead on).
    Taken out, the gap comes back: on seed 8002 since the new term's catch-up is modelled as
    the code runs it (8055 since a read overtaken by the watch is read again)."""
    import k8slease.jobs.lostticks

    assert _leader_gaps(8002, 3600.0) == {}
    monkeypatch.setattr(k8slease.jobs.lostticks, "_names_us", lambda machine, record: False)
    assert "after-deletion" in _leader_gaps(8002, 3600.0)


@pytest.mark.timeout(300)
def test_a_tick_due_between_terms_is_run_or_reported_by_the_new_terms_catch_up() -> None:
    """Seeds 8061 (tick 32) and 8088 (tick 684), 3600 s: a replica's take was answered after a
    pause in which a LEADER tick came due (its entry paused, ``between-terms``); the new term's
    catch-up found the replica's previous run still releasing its lock, and the model gave up.
    The real catch-up, a scheduler job of its own, claims the tick (``JobLock.finish`` lets go
    of the lock before the release write), is told ``RUNNING`` while a grant is held
    (``job.ticks_dropped``) and, the term over, reports it (``leadership-ended``): modelled
    now, the gaps are gone."""
    assert [_leader_gaps(seed, 3600.0) for seed in (8061, 8088)] == [{}, {}]


@pytest.mark.timeout(300)
def test_a_catch_up_that_cannot_read_the_state_still_claims_the_tick_due_between_terms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeds 8020 (tick 370) and 8091 (tick 143), 3600 s: the new leader's catch-up read timed
    out and its term ended before (``jobs.catch_up_unavailable``): nobody ran the tick due
    between its terms, nobody reported it. The catch-up now claims the newest tick within grace
    all the same (``schedule_catch_up``), reported ``leadership-ended`` there. Taken out, the
    gap comes back: on seed 9252 (tick 11: r0's take answered after a 4.4 s pause, its read
    cut off by a partition) since the catch-up is modelled as above."""
    from tests.sim import sim_leader

    assert [_leader_gaps(seed, 3600.0) for seed in (8020, 8091, 9252)] == [{}, {}, {}]
    monkeypatch.setattr(sim_leader, "CATCH_UP_WITHOUT_STATE", False)
    # one tick (another replica then saw the leader Lease just edited by hand: a gap of its own)
    gaps = _leader_gaps(9252, 3600.0)
    assert sum(n for gap, n in gaps.items() if "between-terms" in gap.split("+")) == 1, gaps


@pytest.mark.timeout(300)
def test_a_tick_run_three_times_across_two_hand_deletions_is_counted_apart() -> None:
    """Seed 20058, tick 423: three creates of the job Lease, each applied after a hand deletion
    of the one before, by replicas that had seen none of the earlier grants: the hand deletion
    between two creates (outside the safety model), twice. The ledger judged only a pair and
    reported the third grant as "ran twice" (soak of 2026-12-03); each grant is now judged
    against the one the store applied before it."""
    out = simulate(20058, seconds=2200.0, late_applies=True, leader_jobs=True)
    assert not out.violations, replay_text(out, 2200.0, flags=" --late-applies --leader-jobs")
    three = "tick 423 ran 3 times across hand deletions"
    assert any(a.startswith(three) for a in out.across_deletion), out.across_deletion


@pytest.mark.timeout(300)
def test_a_leader_tick_right_after_a_hand_edit_took_out_a_holder_is_an_open_gap() -> None:
    """Seed 20054, LEADER tick 567: r0's create of the leader Lease was applied after r0 gave
    up on it, and a hand edit took the holder out before anyone (r0 included) saw its name.
    Every replica had seen a holder's write less than a belief before the tick, so none could
    call it (``nobody_leads``'s documented limit); nobody led. Counted apart as the open gap
    ``after-holder-edit``, not a violation (soak of 2026-12-03; seed 20031 before the model
    wrote corrections)."""
    assert _leader_gaps(20054, 2900.0) == {"after-holder-edit": 1}
