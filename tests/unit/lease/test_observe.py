"""Expiry by observation: how long this process has seen a Lease unchanged."""

from __future__ import annotations

from k8slease.lease.observe import LeaseObserver, Observations
from k8slease.lease.view import LeaseView
from k8slease.names import ANN_FENCING_TOKEN
from tests.support.fakeclock import FakeClock


def _lease(renew: str, token: str = "1", rv: str = "1") -> LeaseView:
    return LeaseView.decode(
        {
            "metadata": {
                "name": "x",
                "resourceVersion": rv,
                "annotations": {ANN_FENCING_TOKEN: token},
            },
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10, "renewTime": renew},
        }
    )


def test_observer_restarts_the_timer_only_when_the_record_changes() -> None:
    observer = LeaseObserver()
    assert observer.observe(_lease("2026-01-01T00:00:00.000000Z"), 1.0).first_seen_at == 1.0
    relabelled = _lease("2026-01-01T00:00:00.000000Z", rv="2")
    assert observer.observe(relabelled, 5.0).first_seen_at == 1.0
    renewed = observer.observe(_lease("2026-01-01T00:00:02.000000Z", rv="3"), 6.0)
    assert renewed.first_seen_at == 6.0 and renewed.resource_version == "3"
    new_token = observer.observe(_lease("2026-01-01T00:00:02.000000Z", token="2", rv="4"), 7.0)
    assert new_token.first_seen_at == 7.0
    assert observer.highest_token == 2


def test_observer_remembers_a_held_lease_that_disappeared() -> None:
    observer = LeaseObserver()
    assert observer.observe(None, 0.0).held_before_absence is None
    observer.observe(_lease("2026-01-01T00:00:00.000000Z"), 1.0)
    gone = observer.observe(None, 2.0)
    assert gone.held_before_absence is not None and gone.held_before_absence.holder == "a"
    assert observer.observe(None, 3.0).first_seen_at == 2.0


def test_observations_report_how_long_unchanged() -> None:
    clock = FakeClock()
    observations = Observations(clock)
    assert observations.see("x", _lease("2026-01-01T00:00:00.000000Z")) == 0.0
    clock.advance(4.0)
    assert observations.see("x", _lease("2026-01-01T00:00:00.000000Z", rv="9")) == 4.0
    assert observations.see("y", None) == 0.0


def test_last_held_keeps_the_latest_renewal_when_an_older_answer_arrives_after_it() -> None:
    """A read served before renewal N and answered after the watch delivered N must not move
    ``last_held`` back to N-1 (a release is trusted only if it renews after it; seed 7265)."""
    observer = LeaseObserver()
    observer.observe(_lease("2026-01-01T00:00:04.000000Z", rv="5"), 1.0)  # renewal N, watched
    observer.observe(_lease("2026-01-01T00:00:02.000000Z", rv="4"), 1.1)  # N-1, a late answer
    assert observer.last_held is not None
    assert observer.last_held.renew_time is not None
    assert observer.last_held.renew_time.second == 4
    observer.observe(_lease("2026-01-01T00:00:06.000000Z", rv="6"), 2.0)  # renewal N+1
    assert observer.last_held.renew_time.second == 6


def test_last_held_follows_the_newest_term_whatever_the_holders_clocks_say() -> None:
    """A former holder's wall clock ran 5 minutes ahead: the present holder's records (a higher
    token) renew "earlier" by their timestamps, yet they are the ones its release must renew
    after, or every graceful handover would wait a whole lease."""
    observer = LeaseObserver()
    observer.observe(_lease("2026-01-01T00:05:00.000000Z", token="1", rv="4"), 1.0)
    observer.observe(_lease("2026-01-01T00:00:10.000000Z", token="2", rv="5"), 2.0)
    assert observer.last_held is not None and observer.last_held.fencing_token == 2
    # a late answer from the former term does not bring it back
    observer.observe(_lease("2026-01-01T00:05:01.000000Z", token="1", rv="3"), 2.1)
    assert observer.last_held.fencing_token == 2
    assert observer.last_held.renew_time is not None
    assert observer.last_held.renew_time.minute == 0


def test_a_read_answer_is_overtaken_only_when_something_else_was_seen_while_it_was_out() -> None:
    observer = LeaseObserver()
    old, new = _lease("2026-01-01T00:00:00.000000Z"), _lease("2026-01-01T00:00:02.000000Z")
    observer.observe(old, 1.0)
    sent = observer.sightings
    assert not observer.overtaken(new, sightings=sent), "nothing seen since: the answer is news"
    observer.observe(old, 2.0)  # the same content again (a relist, a bookmark's object)
    assert not observer.overtaken(old, sightings=sent)
    observer.observe(new, 3.0)  # the watch saw a change while the read was out
    assert observer.overtaken(old, sightings=sent), "old content heard after new: may be older"
    assert observer.overtaken(None, sightings=sent)
    assert not observer.overtaken(new, sightings=sent), "agrees with what was seen"
