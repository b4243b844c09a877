"""Every option is validated where it is given, with an error naming it and what is accepted."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from k8slease import (
    ConfigError,
    ElectionTiming,
    HealthServer,
    JobContext,
    Jobs,
    LeaderElector,
    MisfirePolicy,
    Mode,
)
from k8slease.election import timing as timing_module

NAN, INF = math.nan, math.inf


def jobs() -> Jobs:
    return Jobs("billing", namespace="default", identity="a")


def work(ctx: JobContext) -> None:
    return None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lock_at_most_for": INF}, r"lock_at_most_for must be a finite number of seconds >= 1"),
        ({"lock_at_most_for": NAN}, r"lock_at_most_for must be a finite number"),
        ({"lock_at_least_for": INF}, r"lock_at_least_for must be a finite number"),
        ({"grace": NAN}, r"grace must be a finite number of seconds >= 0, got nan"),
        ({"grace": -1}, r"grace must be a finite number of seconds >= 0"),
        ({"misfire": "sometimes"}, r"misfire must be one of MisfirePolicy.SKIP or 'skip'"),
        ({"misfire": 3}, r"misfire must be one of"),
        ({"fail_open": "yes"}, r"fail_open must be True or False"),
    ],
)
def test_job_options_are_refused_at_registration(options: dict[str, Any], message: str) -> None:
    registry = jobs()
    with pytest.raises(ConfigError, match=rf"job 'work': {message}"):
        registry.cron("0 * * * *", **options)(work)
    with pytest.raises(ConfigError, match=message):
        registry.interval(minutes=5, **options)(work)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("skip", MisfirePolicy.SKIP),
        ("SKIP", MisfirePolicy.SKIP),
        ("run-all", MisfirePolicy.RUN_ALL),
        ("RUN_ALL", MisfirePolicy.RUN_ALL),
        (MisfirePolicy.COALESCE, MisfirePolicy.COALESCE),
    ],
)
def test_misfire_takes_the_policy_or_its_value_or_name(given: Any, expected: MisfirePolicy) -> None:
    registry = jobs()
    registry.cron("0 * * * *", misfire=given)(work)
    assert registry.specs["work"].misfire is expected


def test_modes_by_name_and_bad_intervals() -> None:
    registry = jobs()
    registry.singleton(mode="leader")(work)  # type: ignore[arg-type]
    assert registry.specs["work"].mode is Mode.LEADER
    with pytest.raises(ConfigError, match=r"mode must be one of Mode\.EVERY_REPLICA"):
        registry.singleton(mode="sometimes", name="other")(work)  # type: ignore[arg-type]
    for bad in (NAN, INF, -5):
        with pytest.raises(ConfigError, match="seconds must be a finite number of seconds >= 0"):
            registry.interval(seconds=bad)(work)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"request_timeout": NAN}, "request_timeout must be a finite number of seconds > 0"),
        ({"request_timeout": 0}, "request_timeout must be a finite number of seconds > 0"),
        ({"restart_delay": NAN}, "restart_delay must be a finite number of seconds >= 0"),
        ({"restart_delay": -1}, "restart_delay must be"),
        ({"namespace": "Not A Namespace"}, "namespace"),
        ({"identity": ""}, "identity must be a non-empty string"),
        ({"handle_signals": "no"}, "handle_signals must be True or False"),
        ({"election": {"lease_duration": 0}}, "election must be an ElectionTiming"),
    ],
)
def test_jobs_constructor_options(options: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"namespace": "default", "identity": "a"}
    with pytest.raises(ConfigError, match=message):
        Jobs("billing", **{**base, **options})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_duration": 0}, "lease_duration must be a finite number of seconds > 0"),
        ({"request_timeout": NAN}, "request_timeout must be a finite number of seconds > 0"),
        ({"renew_deadline": INF}, "renew_deadline must be a finite number"),
        ({"release_on_stop": "no"}, "release_on_stop must be True or False"),
        ({"release_on_return": 1}, "release_on_return must be True or False"),
        ({"handle_signals": None}, "handle_signals must be True or False"),
    ],
)
def test_elector_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LeaderElector("billing", namespace="default", identity="a", **options)


def test_a_leader_job_with_a_zero_lease_fails_when_the_timing_is_given() -> None:
    with pytest.raises(ConfigError, match="lease_duration must be a finite number of seconds > 0"):
        Jobs("billing", namespace="default", election=ElectionTiming(lease_duration=0))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": 70000}, "port must be an int from 0"),
        ({"port": "8080"}, "port must be an int from 0"),
        ({"host": ""}, "host must be an address"),
        ({"check": "healthy"}, "check must be a callable"),
    ],
)
def test_health_server_options(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"check": lambda: True, "host": "127.0.0.1", "port": 0, **options}
    with pytest.raises(ConfigError, match=message):
        HealthServer(**arguments)


def test_a_thin_margin_for_client_go_peers_is_warned_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing_module, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        ElectionTiming(lease_duration=15, renew_interval=5, renew_deadline=10)
        assert caplog.records == []
        for _ in range(3):
            ElectionTiming(lease_duration=3, renew_interval=0.8, renew_deadline=2.5)
    [record] = caplog.records
    assert "timing.thin_margin" in record.getMessage()
    assert "whole seconds" in record.getMessage()
