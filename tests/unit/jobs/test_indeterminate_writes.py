"""Lock writes whose answer did not arrive (issue 26): the next look at the Lease settles them.

A fake store applies conditional writes like kube-apiserver and can lose an answer: the write
is applied (now, or later) and the caller gets ``Unavailable`` as on a timeout.
"""

from __future__ import annotations

import copy
import logging
from datetime import datetime
from typing import Any

import pytest

from k8slease.errors import Unavailable
from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.lockcache import ClaimCache
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.observe import Observations
from k8slease.lease.view import LeaseView
from tests.support.factories import make_lock
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import (
    LosingStore,
    job_lock,
    logged_events,
    succeeded_while_cut_off,
    tick_at,
)

NAME = "g.job"


def _cached_lock(store: LosingStore, clock: FakeClock, observations: Observations) -> JobLock:
    """r0's lock (30 s at most) judging on ``observations`` through a claim cache, unordered:
    the informer-fed shape of a lock that Jobs builds."""
    return make_lock(
        store,
        identity="r0",
        lock_at_most_for=30,
        clock=clock,
        observations=observations,
        cache=ClaimCache(observations, lambda: True, step=0.5, spread=3),
        ordered=False,
    )


def _unanswered_claim(
    lose: str, **options: float
) -> tuple[FakeClock, LosingStore, JobLock, datetime]:
    """r0's claim of the tick now, whose write is lost the way ``lose`` says (LosingStore.lose): the
    claim raises Unavailable. Returns the clock, the store, r0's lock and the tick."""
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock, **options)
    t1 = tick_at(clock)
    store.lose = [lose]
    with pytest.raises(Unavailable):
        lock.try_acquire(t1)
    return clock, store, lock, t1


def test_a_claim_applied_after_its_timeout_is_run_within_its_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claim of T1 is applied but its answer lost; 15 s later (the server back) the next
    tick's claim finds the Lease naming this replica: T1 is still within its grace and the
    budget, so it runs T1 (said at WARNING), not skip as "held by r0" until the lock ends."""
    clock, store, lock, t1 = _unanswered_claim("applied")
    assert store.view().record.holder == "r0"  # applied: the Lease names r0
    clock.advance(15)

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        grant = lock.try_acquire(tick_at(clock))

    assert isinstance(grant, Grant), f"skipped with {grant}"
    assert grant.tick == t1 and grant.fencing_token == store.view().fencing_token
    assert not grant.lost.is_set()
    assert "lock.claim_applied_late" in logged_events(caplog)
    lock.finish(grant, "succeeded")
    assert store.view().job.last_run is not None
    assert store.view().job.last_run.outcome == "succeeded"


def test_a_claim_applied_past_its_grace_is_released_at_once_and_the_next_tick_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past its grace the late-applied claim is not run: the tick is recorded lost (reported at
    WARNING) in the same write that claims the next tick, which runs at once."""
    clock, store, lock, t1 = _unanswered_claim("applied", grace=10)
    clock.advance(15)
    t2 = tick_at(clock)

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        grant = lock.try_acquire(t2)

    assert isinstance(grant, Grant) and grant.tick == t2, f"skipped with {grant}"
    job = store.view().job
    assert job.claimed_tick == t2
    assert job.last_run is not None and job.last_run.tick == t1
    assert job.last_run.outcome == "lost" and job.last_run.holder == "r0"
    assert job.count("lost") == 1
    assert {"lock.claim_applied_late", "lock.tick_lost"} <= set(logged_events(caplog))


def test_a_claim_applied_past_the_keepalive_budget_is_not_run() -> None:
    """Within its grace but past 2/3 of lock_at_most_for since it was sent: another replica may
    take the lock over soon, so the run would start already lost: released, the next tick runs."""
    clock, store, lock, t1 = _unanswered_claim("applied", at_most=30, grace=300)
    clock.advance(21)
    t2 = tick_at(clock)

    grant = lock.try_acquire(t2)

    assert isinstance(grant, Grant) and grant.tick == t2
    assert store.view().job.last_run is not None
    assert store.view().job.last_run.tick == t1


def test_a_claim_still_in_flight_is_settled_when_it_lands() -> None:
    """The claim's answer is lost and the write not yet applied: the next read sees the Lease
    unchanged (open), the replica does not run; the write then lands, and the next look runs it."""
    clock, store, lock, t1 = _unanswered_claim("later")
    clock.advance(5)
    store.land()
    clock.advance(5)

    grant = lock.try_acquire(tick_at(clock))

    assert isinstance(grant, Grant) and grant.tick == t1


def test_a_claim_that_was_not_applied_is_settled_as_refused() -> None:
    """Server down: the claim never lands; the next tick is claimed normally, token one up."""
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock)
    first = lock.try_acquire(tick_at(clock))
    assert isinstance(first, Grant)
    lock.finish(first, "succeeded")
    store.lose = ["down"]
    with pytest.raises(Unavailable):
        lock.try_acquire(tick_at(clock, 10))
    clock.advance(20)
    t3 = tick_at(clock)

    grant = lock.try_acquire(t3)

    assert isinstance(grant, Grant) and grant.tick == t3
    assert store.view().job.count("lost") == 0


def test_other_replicas_report_each_tick_skipped_for_a_silent_holder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """r0's claim was applied after r0 gave up (and r0 fires no more ticks): r1 skips while the
    lock runs out, each skip at WARNING once the holder has been silent past a keep-alive."""
    clock, store, _, _ = _unanswered_claim("applied", at_most=30)
    r1 = job_lock(store, clock, "r1", at_most=30)
    clock.advance(2)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        assert r1.try_acquire(tick_at(clock)) is Verdict.HELD  # just seen: not silent yet
    assert "lock.skipped_silent_holder" not in logged_events(caplog)
    caplog.clear()
    clock.advance(16)  # past one keep-alive (10 s) + a request timeout (5 s), unchanged

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        assert r1.try_acquire(tick_at(clock)) is Verdict.HELD
        clock.advance(2)
        assert r1.try_acquire(tick_at(clock)) is Verdict.HELD

    assert logged_events(caplog).count("lock.skipped_silent_holder") == 2


def test_a_lock_kept_idle_by_lock_at_least_for_is_not_silent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, store = FakeClock(), LosingStore()
    r0 = make_lock(store, identity="r0", lock_at_most_for=60, lock_at_least_for=60, clock=clock)
    r1 = job_lock(store, clock, "r1", at_most=60)
    grant = r0.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    r0.finish(grant, "succeeded")
    r1.try_acquire(tick_at(clock, 1))
    clock.advance(40)
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        assert r1.try_acquire(tick_at(clock)) is Verdict.HELD
    assert "lock.skipped_silent_holder" not in logged_events(caplog)


def test_a_finished_run_whose_release_was_not_answered_is_written_by_the_next_write() -> None:
    """The run succeeded; its release got no answer (not applied). The record is kept and the
    next claim writes it first: the Lease records the success, never a lost run."""
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock, at_most=30)
    grant = lock.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    store.down = True
    run = lock.finish(grant, "succeeded")
    assert run.outcome == "succeeded"
    assert store.view().record.holder == "r0"  # the release did not land
    clock.advance(5)
    store.down = False
    t2 = tick_at(clock)

    second = lock.try_acquire(t2)

    assert isinstance(second, Grant) and second.tick == t2, f"skipped with {second}"
    job = store.view().job
    assert job.count("succeeded") == 1 and job.count("lost") == 0
    assert job.completed_tick == grant.tick


def test_a_release_applied_but_unanswered_is_not_written_twice() -> None:
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock, at_most=30)
    grant = lock.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    store.lose = ["applied"]
    lock.finish(grant, "succeeded")
    clock.advance(5)

    second = lock.try_acquire(tick_at(clock))

    assert isinstance(second, Grant)
    assert store.view().job.count("succeeded") == 1


def test_a_release_not_answered_is_retried_until_it_lands_before_anyone_may_take_over() -> None:
    """The holder is cut off from the server as its run finishes (the partition scenario): the
    release is retried in the background and lands once the server answers, within
    lock_at_most_for, so the replica that would have taken the lock over finds the run recorded
    as it ended instead of recording it lost."""
    clock, store = FakeClock(), LosingStore()
    r0, r1 = job_lock(store, clock, "r0", at_most=30), job_lock(store, clock, "r1", at_most=30)
    grant = r0.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    r1.read_state()
    store.down = True
    r0.finish(grant, "succeeded")
    assert clock.settle(sleepers=1)  # the retry thread waits: the clock knows it from now on
    assert not clock.run_until(lambda: store.view().record.holder == "", limit=3, step=0.5)
    store.down = False

    assert clock.run_until(lambda: store.view().record.holder == "", limit=5, step=0.5)

    clock.advance(30)
    later = r1.try_acquire(tick_at(clock))
    assert isinstance(later, Grant)
    job = store.view().job
    assert job.count("succeeded") == 1 and job.count("lost") == 0
    assert job.last_run is not None and job.last_run.outcome == "succeeded"


def test_an_earlier_claim_landing_after_a_later_one_failed_too_is_still_settled() -> None:
    """Soak seed 6004: the claim of T1 got no answer (it lands later); the claim of T2, on the
    same Lease version and token, got a 5xx. When T1's write lands, the next look still finds
    this replica's claim (by holder and token) and runs T1, the tick the Lease says, with the
    budget counted from T1's send, the earlier one."""
    clock, store, lock, t1 = _unanswered_claim("later", at_most=30, grace=300)
    clock.advance(5)
    store.lose = ["down"]
    with pytest.raises(Unavailable):
        lock.try_acquire(tick_at(clock))
    store.land()
    clock.advance(10)

    grant = lock.try_acquire(tick_at(clock))

    assert isinstance(grant, Grant) and grant.tick == t1, f"skipped with {grant}"
    clock.advance(6)  # 21 s after T1's claim was sent: past 2/3 of 30 s
    assert grant.lost.is_set(), "the budget was counted from the later send"


def test_a_kept_release_written_on_a_stale_view_reads_and_writes_again() -> None:
    """Soak seed 6050: the holder's release got no answer and one of its own extensions landed
    late, after the view it judges on. The kept release's write on that view is a 409; the lock
    reads, finds the Lease still naming its grant and releases, then claims the next tick,
    instead of skipping it as held by itself."""
    clock, store = FakeClock(), LosingStore()
    observations = Observations(clock)
    lock = _cached_lock(store, clock, observations)
    grant = lock.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    store.lose = ["later"]
    assert not lock.extend_once(grant)  # the extension's answer is lost; it lands later
    store.down = True
    lock.finish(grant, "succeeded")
    store.down = False
    store.land()  # the extension lands; the informer has not shown it (stale view)
    clock.advance(3)
    t2 = tick_at(clock)

    second = lock.try_acquire(t2)

    assert isinstance(second, Grant) and second.tick == t2, f"skipped with {second}"
    job = store.view().job
    assert job.count("succeeded") == 1 and job.count("lost") == 0


def test_an_own_claim_landing_while_the_replica_judges_is_settled_not_skipped() -> None:
    """Soak seed 7141: the settling read still shows the Lease as before (the claim is open);
    the claim lands right after, and the informer's view shows it while the replica judges its
    next tick. It is this replica's own claim: settled there (run within its grace), not
    skipped as held by itself."""
    clock = FakeClock()
    observations = Observations(clock)

    class LandsAfterRead(LosingStore):
        def get(self, name: str) -> dict[str, Any]:
            before = super().get(name)
            if self.late:
                self.land()
                assert self.lease is not None
                observations.see(NAME, LeaseView.decode(copy.deepcopy(self.lease)))
            return before

    store = LandsAfterRead()
    lock = _cached_lock(store, clock, observations)
    first = lock.try_acquire(tick_at(clock))
    assert isinstance(first, Grant)
    lock.finish(first, "succeeded")
    clock.advance(5)
    t1 = tick_at(clock)
    store.lose = ["later"]
    with pytest.raises(Unavailable):
        lock.try_acquire(t1)
    clock.advance(3)

    grant = lock.try_acquire(tick_at(clock))

    assert isinstance(grant, Grant) and grant.tick == t1, f"skipped with {grant}"


def test_a_claim_applied_long_after_it_was_sent_is_reported_from_the_first_skip(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """r0's claim lands 29 s after r0 sent it (and gave up on it): r1 sees it fresh, but the
    holder's own write is older than a keep-alive (10 s) + a request timeout (5 s) + a keep-alive
    of skew allowance: its first skip is at WARNING, not DEBUG (soak seed 8002, tick 151)."""
    clock, store, _, _ = _unanswered_claim("later", at_most=30)
    r1 = job_lock(store, clock, "r1", at_most=30)
    clock.advance(29)
    store.land()

    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        assert r1.try_acquire(tick_at(clock)) is Verdict.HELD

    assert "lock.skipped_silent_holder" in logged_events(caplog)


def test_the_catch_up_read_does_not_make_a_released_grant_look_held_again() -> None:
    """The catch-up's read (a term begins) was sent before this replica's release of its last
    grant applied and answered after it: seen last, the stale answer made the Lease look held
    by this replica's finished grant, and the next tick was skipped at DEBUG "held by" itself
    (soak seeds 8049, 8197: LEADER ticks lost without a report). The read only informs the
    catch-up now."""
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock, at_most=30)
    grant = lock.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    stale = copy.deepcopy(store.lease)  # the read's answer, served before the release
    lock.finish(grant, "succeeded")
    store.get = lambda name: copy.deepcopy(stale)  # type: ignore[method-assign]

    assert lock.read_state() is not None
    seen = lock.seen()
    assert seen is not None and not seen.record.held, "the stale read was taken as the latest"
    store.get = LosingStore.get.__get__(store)  # type: ignore[method-assign]
    clock.advance(10)
    assert isinstance(lock.try_acquire(tick_at(clock)), Grant)


def test_a_run_recorded_lost_by_a_takeover_is_corrected_at_the_next_look_without_a_claim(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """r0's run of T1 succeeded while it was cut off; r1 took the lock over after 30 s and
    recorded T1 ``lost``, then ran and released T2 and T3. r0's next look (T3, which r1 ran
    already: r0 skips it) writes the correction into the free Lease: it does not wait until it
    wins a claim again, which the claim order can put off for many ticks (chaos partition
    scenario, make test of 2026-12-03)."""
    clock, store = FakeClock(), LosingStore()
    r0, r1 = job_lock(store, clock, at_most=30), job_lock(store, clock, "r1", at_most=30)
    succeeded_while_cut_off(store, clock, r0)
    assert r1.try_acquire(tick_at(clock, 1)) is Verdict.HELD  # r1 starts seeing it unchanged
    clock.advance(31)
    for _ in range(2):
        taken = r1.try_acquire(tick_at(clock))
        assert isinstance(taken, Grant), f"r1 skipped with {taken}"
        r1.finish(taken, "succeeded")
        clock.advance(2)
    assert store.view().job.count("lost") == 1  # the takeover counted T1 lost
    writes = store.writes

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        skipped = r0.try_acquire(taken.tick)

    assert skipped is Verdict.ALREADY_CLAIMED
    job = store.view().job
    assert (job.count("lost"), job.count("succeeded")) == (0, 3)
    assert store.view().record.holder == "", "the lock record is left as it was: free"
    assert store.writes == writes + 1
    assert "lock.run_corrected_late" in logged_events(caplog)
    assert r0.try_acquire(taken.tick) is Verdict.ALREADY_CLAIMED
    assert store.writes == writes + 1, "written once"


def test_a_kept_run_record_rides_on_the_create_of_a_lease_deleted_meanwhile() -> None:
    """r0's run of T1 succeeded while it was cut off (the record kept), and the job Lease was
    deleted by hand meanwhile. r0's claim that creates it again carries the kept record: T1 is
    recorded succeeded. Before, the create counted T1 ``lost`` (seen claimed and held, never
    finished) and the grant dropped the kept record unwritten: found by the simulation (late
    applies, seeds 1 and 6)."""
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock, at_most=30)
    t1 = succeeded_while_cut_off(store, clock, lock)
    store.lease = None  # deleted by hand
    clock.advance(5)
    # the lock it saw held before the deletion is waited out from when it saw it gone
    assert lock.try_acquire(tick_at(clock)) is Verdict.HELD
    clock.advance(31)
    t3 = tick_at(clock)

    created = lock.try_acquire(t3)

    assert isinstance(created, Grant) and created.tick == t3, f"skipped with {created}"
    job = store.view().job
    assert (job.count("succeeded"), job.count("lost")) == (1, 0)
    assert job.last_run is not None and job.last_run.tick == t1
    assert job.completed_tick == t1
    assert lock._unwritten is None


def test_a_kept_run_record_carried_by_a_claim_applied_unanswered_is_not_written_twice() -> None:
    """r0's run of T1 succeeded while it was cut off (kept); r1 took the lock over (T1
    recorded lost), claimed T2 and died holding it. r0's claim of T3 takes the expired lock
    over: it carries T1's record (T1 lost -> succeeded) and records T2 lost, and is applied,
    but its answer is lost. Settling it, r0 knows T1's record was written with it. Before, r0
    kept the record and wrote it again at its next look: a second "correction" that turned
    T2's lost run into a success (soak of 2026-12-03, seed 30004)."""
    clock, store = FakeClock(), LosingStore()
    r0, r1 = job_lock(store, clock, at_most=30), job_lock(store, clock, "r1", at_most=30)
    succeeded_while_cut_off(store, clock, r0)
    assert r1.try_acquire(tick_at(clock, 1)) is Verdict.HELD  # r1 starts seeing it unchanged
    clock.advance(31)
    taken = r1.try_acquire(tick_at(clock))  # T2: r1 takes over, records T1 lost, then dies
    assert isinstance(taken, Grant), f"r1 skipped with {taken}"
    assert store.view().job.count("lost") == 1
    assert r0.try_acquire(tick_at(clock, 1)) is Verdict.HELD  # r0 sees r1's Lease, unchanged
    clock.advance(31)
    store.lose = ["applied"]
    with pytest.raises(Unavailable):
        r0.try_acquire(tick_at(clock))  # T3: carries T1's record, records T2 lost
    job = store.view().job
    assert (job.count("succeeded"), job.count("lost")) == (1, 1), "T1 corrected, T2 lost"

    adopted = r0.try_acquire(tick_at(clock, 5))  # settles T3's claim: applied, run in its grace
    assert isinstance(adopted, Grant)
    r0.finish(adopted, "succeeded")
    clock.advance(5)
    r0.try_acquire(tick_at(clock, 5))  # the next look: nothing kept to write again

    job = store.view().job
    assert (job.count("succeeded"), job.count("lost")) == (2, 1), "T2 is still lost"
    assert r0._unwritten is None
