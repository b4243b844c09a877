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
        ({"renew_interval": 40.0}, "renew_interval"),
        ({"renew_deadline": 60.0}, "renew_deadline"),
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
