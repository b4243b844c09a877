"""ElectionTiming: validated on construction, errors name the option."""

from __future__ import annotations

import pytest

from k8slease.election.timing import ElectionTiming
from k8slease.errors import ConfigError

# -- timing validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"lease_duration": 2.5}, "whole number"),
        ({"lease_duration": 0}, "> 0"),
        ({"renew_interval": 40.0, "renew_deadline": 30.0}, "renew_interval"),
        ({"renew_deadline": 60.0, "lease_duration": 60}, "renew_deadline"),
        ({"retry_interval": -1}, "retry_interval"),
        ({"request_timeout": 40.0}, "request_timeout"),
        ({"lease_duration": float("nan")}, "finite"),
        ({"renew_interval": True}, "number"),
    ],
)
def test_timing_is_validated_with_clear_errors(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        ElectionTiming(**kwargs)  # type: ignore[arg-type]


def test_timing_defaults_and_derived_values() -> None:
    timing = ElectionTiming()
    assert timing.lease_duration_seconds == 60
    assert timing.timeout == 10.0
    assert timing.renew_retry_interval == 5.0
    short = ElectionTiming(
        lease_duration=2, renew_interval=0.5, renew_deadline=1.5, retry_interval=1.0
    )
    assert short.timeout == pytest.approx(0.5)
    assert short.renew_retry_interval == pytest.approx(0.25)


# -- unset options follow from the given ones (issue 21) -----------------------------------------


def test_client_go_timings_are_accepted_as_given() -> None:
    """client-go's 15/10/2: ``renew_interval``'s default (20 s) used to refuse them."""
    timing = ElectionTiming(lease_duration=15, renew_deadline=10, retry_interval=2)
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_interval) == (15, 10, 2)
    assert timing.renew_interval == 5


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, (60, 20, 40, 5)),
        ({"lease_duration": 15}, (15, 5, 10, 1.25)),
        ({"lease_duration": 4}, (4, 4 / 3, 8 / 3, 1 / 3)),
        ({"renew_deadline": 10}, (15, 5, 10, 1.25)),
        ({"renew_interval": 30}, (90, 30, 60, 5)),
        ({"lease_duration": 15, "renew_interval": 12}, (15, 12, 13.5, 1.25)),
        ({"renew_deadline": 1.5}, (3, 0.75, 1.5, 0.25)),
    ],
)
def test_unset_options_follow_from_the_given_ones(
    given: dict[str, float], expected: tuple[float, float, float, float]
) -> None:
    timing = ElectionTiming(**given)
    got = (timing.lease_duration, timing.renew_interval, timing.renew_deadline,
           timing.retry_interval)  # fmt: skip
    assert got == pytest.approx(expected)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"lease_duration": 15, "renew_interval": 20},
            r"renew_interval \(20s, as given\) must be shorter than lease_duration"
            r" \(15s, as given\)",
        ),
        (
            {"lease_duration": 15, "renew_interval": 10, "renew_deadline": 9},
            r"renew_interval \(10s, as given\) must be shorter than renew_deadline"
            r" \(9s, as given\)",
        ),
        (
            {"renew_deadline": 1.5, "renew_interval": 0.5, "lease_duration": 1},
            r"renew_deadline \(1.5s, as given\) must be shorter than lease_duration"
            r" \(1s, as given\)",
        ),
        (
            {"lease_duration": 15, "renew_deadline": 20},
            r"renew_deadline \(20s, as given\) must be shorter than lease_duration"
            r" \(15s, as given\)",
        ),
        (
            {"renew_interval": 10, "renew_deadline": 5},
            r"renew_interval \(10s, as given\) must be shorter than renew_deadline"
            r" \(5s, as given\)",
        ),
    ],
)
def test_errors_name_what_the_user_wrote(given: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ElectionTiming(**given)


def test_the_elector_takes_client_go_timings() -> None:
    from k8slease import LeaderElector

    elector = LeaderElector(
        "billing", namespace="default", identity="a",
        lease_duration=15, renew_deadline=10, retry_interval=2,
    )  # fmt: skip
    assert elector.timing.renew_interval == 5
