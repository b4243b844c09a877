"""The interop tests' "never two leaders" check finds overlapping terms (and only those)."""

from __future__ import annotations

from tests.peers.peerproc import Interval, overlaps


def test_overlapping_terms_of_two_identities_are_found() -> None:
    a = Interval("py-1", 10.0, 12.0)
    b = Interval("go-1", 11.999, 15.0)
    assert overlaps([b, a]) == [(a, b)]


def test_a_term_inside_a_longer_one_is_found_past_shorter_ones() -> None:
    long = Interval("py-1", 0.0, 100.0)
    short = Interval("py-1", 1.0, 2.0)
    late = Interval("go-1", 50.0, 51.0)
    assert overlaps([short, late, long]) == [(long, late)]


def test_terms_that_touch_or_share_an_identity_do_not_overlap() -> None:
    terms = [Interval("py-1", 0.0, 1.0), Interval("go-1", 1.0, 2.0), Interval("go-1", 1.5, 3.0)]
    assert overlaps(terms) == []


def test_a_term_still_open_overlaps_everything_after_its_start() -> None:
    open_term = Interval("go-1", 5.0, float("inf"))
    assert overlaps([open_term, Interval("py-2", 99.0, 100.0)]) != []
