"""Expiry by observation: how long this process has seen a Lease unchanged."""

from __future__ import annotations

from k8slease.lease.meta import version_number
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


def test_a_watch_event_older_than_the_view_is_not_taken_as_the_lease_state() -> None:
    """The claim's event arriving after the answer to the release that followed it: the view
    stays released (taken, it made the next tick skip as "held by" the replica itself). The
    late event's fencing token and claimed tick still count."""
    clock = FakeClock()
    observations = Observations(clock)
    claim = _lease("2026-01-01T00:00:00.000000Z", token="7", rv="41")
    released = LeaseView.decode(
        {
            **claim.body,
            "metadata": {**claim.body["metadata"], "resourceVersion": "42"},
            "spec": {"leaseDurationSeconds": 10},
        }
    )
    observations.see("x", released)  # the release's answer
    clock.advance(5)
    assert observations.see_event("x", claim, version="41") is False
    seen = observations.current("x")
    assert seen.observation is not None and seen.observation.view == released
    assert seen.unchanged_for == 5.0, "a late event does not restart the timer either"
    assert seen.highest_token == 7
    # newer events, and events whose versions do not compare, are taken as before
    newer = _lease("2026-01-01T00:00:09.000000Z", token="8", rv="43")
    assert observations.see_event("x", newer, version="43") is True
    assert observations.current("x").observation.view == newer  # type: ignore[union-attr]
    for opaque in ("0x2a", "040", "", "abc"):
        assert observations.see_event("x", claim, version=opaque) is True
        assert observations.current("x").observation.view == claim  # type: ignore[union-attr]
        observations.see("x", newer)


def test_a_late_deletion_event_and_an_absent_read() -> None:
    """A deletion at version 50 heard after the Lease was seen recreated at 51 changes nothing;
    a read that found the Lease absent carries no version, so any event after it is taken."""
    observations = Observations(FakeClock())
    observations.see("x", _lease("2026-01-01T00:00:00.000000Z", rv="51"))
    assert observations.see_event("x", None, version="50") is False
    assert observations.current("x").observation.view is not None  # type: ignore[union-attr]
    observations.see("x", None)  # a read answered 404
    assert observations.see_event("x", _lease("2026-01-01T00:00:00.000000Z", rv="3"), version="3")
    assert observations.see_event("x", None, version="60") is True
    assert (
        observations.see_event("x", _lease("2026-01-01T00:00:00.000000Z", rv="59"), version="59")
        is False
    ), "older than the deletion seen"


def test_resource_versions_compare_as_kep_5504_defines_them() -> None:
    """Positive decimal integers without leading zeros compare; anything else is opaque."""
    assert version_number("42") == 42 and version_number("1" * 30) == int("1" * 30)
    for opaque in ("", "0", "007", "-3", "+3", "3.0", "0x2a", "٣", " 3"):
        assert version_number(opaque) is None, opaque
