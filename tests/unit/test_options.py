"""Every option is validated where it is given, with an error naming it and what is accepted."""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from k8slease import (
    AsyncLeaderElector,
    ConfigError,
    ElectionTiming,
    HealthServer,
    JobContext,
    Jobs,
    JobSpec,
    LeaderElector,
    MisfirePolicy,
    Mode,
    TickLock,
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


# -- the one limit of every duration: 2147483647 s (leaseDurationSeconds is an int32) ----------

LIMIT = 2_147_483_647
TOO_LONG = [
    pytest.param(2**31, id="2**31"),
    pytest.param(1e300, id="1e300"),
    pytest.param(10**400, id="10**400"),
]
TIMING_OPTIONS = ["lease_duration", "renew_interval", "renew_deadline", "retry_interval"]


def ticks() -> TickLock:
    return TickLock("billing", namespace="default", identity="a", journal=None)


def too_long(option: str) -> str:
    return rf"{option} must be at most 2147483647 seconds \(.*leaseDurationSeconds is an int32\)"


#: every public form that takes an election duration, given one option
ELECTION_FORMS: dict[str, Callable[[dict[str, Any]], object]] = {
    "ElectionTiming": lambda kw: ElectionTiming(**kw),
    "LeaderElector": lambda kw: LeaderElector("billing", namespace="default", identity="a", **kw),
    "AsyncLeaderElector": lambda kw: AsyncLeaderElector("billing", namespace="default", **kw),
    "Jobs(election=)": lambda kw: Jobs(
        "billing", namespace="default", election=ElectionTiming(**kw)
    ),
}


@pytest.mark.parametrize("value", TOO_LONG)
@pytest.mark.parametrize("option", [*TIMING_OPTIONS, "request_timeout"])
@pytest.mark.parametrize("form", list(ELECTION_FORMS))
def test_an_election_duration_beyond_int32_is_refused(form: str, option: str, value: float) -> None:
    """Before: lease_duration=2**31 made the elector step down at once (its own Lease read back
    as malformed), renew_deadline=1e200 crashed every request, renew_interval=1e308 raised a
    bare OverflowError."""
    with pytest.raises(ConfigError, match=too_long(option)):
        ELECTION_FORMS[form]({option: value})


@pytest.mark.parametrize(
    ("options", "derived"),
    [
        ({"renew_deadline": 2e9}, "derived from renew_deadline"),
        ({"renew_interval": 1e9}, "derived from renew_interval"),
    ],
)
def test_a_derived_lease_duration_beyond_int32_is_refused(
    options: dict[str, float], derived: str
) -> None:
    with pytest.raises(ConfigError, match=rf"{too_long('lease_duration')}, got 3e\+09s, {derived}"):
        ElectionTiming(**options)


def test_the_limit_itself_is_accepted() -> None:
    timing = ElectionTiming(lease_duration=LIMIT)
    assert timing.lease_duration_seconds == LIMIT
    registry = jobs()
    registry.cron("0 * * * *", lock_at_most_for=LIMIT, lock_at_least_for=LIMIT, grace=LIMIT)(work)
    registry.interval(seconds=LIMIT, name="rare")(work)
    assert registry.specs["work"].lock_at_most_for == LIMIT


#: every public form that takes a job's lock times or grace, given one option
JOB_FORMS: dict[str, Callable[[dict[str, Any]], object]] = {
    "Jobs.cron": lambda kw: jobs().cron("0 * * * *", **kw)(work),
    "Jobs.interval": lambda kw: jobs().interval(minutes=5, **kw)(work),
    "Jobs.add": lambda kw: jobs().add(JobSpec("work", work, Mode.ONCE_PER_TICK, None, **kw)),
    "JobSpec.validate": lambda kw: JobSpec("work", work, Mode.LEADER, None, **kw).validate(),
}
TICKLOCK_FORMS: dict[str, Callable[[dict[str, Any]], object]] = {
    "TickLock.hold": lambda kw: ticks().hold("work", period=60, **kw),
    "TickLock.once_per_tick": lambda kw: ticks().once_per_tick(period=60, **kw)(work),
}


LOCK_TIMES = ["lock_at_most_for", "lock_at_least_for"]
JOB_DURATIONS = [(form, option) for form in JOB_FORMS for option in [*LOCK_TIMES, "grace"]]
JOB_DURATIONS += [(form, option) for form in TICKLOCK_FORMS for option in LOCK_TIMES]


@pytest.mark.parametrize("value", TOO_LONG)
@pytest.mark.parametrize(("form", "option"), JOB_DURATIONS)
def test_a_job_duration_beyond_int32_is_refused_at_registration(
    form: str, option: str, value: float
) -> None:
    """Before: lock_at_most_for=1e300 was registered; the first tick wrote a Lease whose
    leaseDurationSeconds had 301 digits, then raised OverflowError, and no tick ever ran again."""
    options = {option: value}
    if option == "lock_at_least_for":  # it is checked against lock_at_most_for after its limit
        options["lock_at_most_for"] = LIMIT
    with pytest.raises(ConfigError, match=too_long(option)):
        {**JOB_FORMS, **TICKLOCK_FORMS}[form](options)


@pytest.mark.parametrize(
    ("make", "option"),
    [
        (lambda: jobs().interval(seconds=1e300)(work), "seconds"),
        (lambda: jobs().interval(weeks=2**31)(work), "weeks"),
        (
            lambda: jobs().interval(weeks=4000)(work),
            r"the interval \(seconds/minutes/hours/days/weeks added up\)",
        ),
        (lambda: jobs().cron("0 * * * *", misfire_grace_time=1e300)(work), "grace"),
        (lambda: Jobs("billing", namespace="default", restart_delay=1e300), "restart_delay"),
        (lambda: Jobs("billing", namespace="default", request_timeout=2**31), "request_timeout"),
        (
            lambda: TickLock("billing", namespace="default", request_timeout=1e300),
            "request_timeout",
        ),
        (lambda: ticks().hold("work", period=1e300), "period"),
        (lambda: ticks().hold("work", period=timedelta(seconds=2**31)), "period"),
        (lambda: ticks().once_per_tick(period=timedelta.max)(work), "period"),
    ],
)
def test_other_durations_beyond_int32_are_refused(make: Callable[[], object], option: str) -> None:
    """Before: interval(seconds=1e300) raised OverflowError; the others were accepted and would
    overflow a wait or a socket timeout (a period given as a timedelta: accepted, however long)."""
    with pytest.raises(ConfigError, match=too_long(option)):
        make()


def test_a_period_is_bounded_alike_in_seconds_and_as_a_timedelta() -> None:
    for period in (2**31, timedelta(seconds=2**31)):
        with pytest.raises(ConfigError) as caught:
            ticks().hold("work", period=period)
        assert str(caught.value) == (
            "job 'work': period must be at most 2147483647 seconds (k8slease's limit for every "
            f"duration: a Lease's leaseDurationSeconds is an int32), got {period!r}"
        )
    ticks().once_per_tick(period=timedelta(seconds=LIMIT))(work)  # the limit itself is taken
    for short in (timedelta(0), -timedelta(microseconds=1)):
        with pytest.raises(ConfigError, match=r"^job 'work': period must be positive"):
            ticks().hold("work", period=short)


# -- names: the group is also a label value; a namespace given is one ---------------------------


@pytest.mark.parametrize("form", [Jobs, TickLock])
def test_a_job_group_longer_than_a_label_value_is_refused(form: Callable[..., object]) -> None:
    """Before: a group of 64 (up to 253) characters was taken, and every tick failed with a 422
    reported as job.api_unreachable (the group is the k8slease.io/group label value)."""
    for length in (64, 200, 253):
        with pytest.raises(
            ConfigError, match=rf"group 'a+' is {length} characters long; at most 63"
        ):
            form("a" * length, namespace="default", identity="a", journal=None)
    made = form("a" * 63, namespace="default", identity="a", journal=None)
    assert made.group == "a" * 63  # type: ignore[attr-defined]


NAMESPACE_FORMS: dict[str, Callable[..., object]] = {
    "LeaderElector": lambda ns: LeaderElector("billing", namespace=ns, identity="a"),
    "AsyncLeaderElector": lambda ns: AsyncLeaderElector("billing", namespace=ns, identity="a"),
    "Jobs": lambda ns: Jobs("billing", namespace=ns, identity="a"),
    "TickLock": lambda ns: TickLock("billing", namespace=ns, identity="a", journal=None),
}


@pytest.mark.parametrize("namespace", ["", 0, b"default"])
@pytest.mark.parametrize("form", list(NAMESPACE_FORMS))
def test_a_namespace_given_must_be_one(form: str, namespace: object) -> None:
    """Before: "" and 0 silently meant the default namespace; only None does."""
    with pytest.raises(
        ConfigError, match=rf"namespace {namespace!r} is not a DNS label.*pass None"
    ):
        NAMESPACE_FORMS[form](namespace)


@pytest.mark.parametrize("form", list(NAMESPACE_FORMS))
def test_none_is_the_default_namespace(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    made: Any = NAMESPACE_FORMS[form](None)
    elector = made.elector if isinstance(made, AsyncLeaderElector) else made
    assert elector.namespace == "from-env"


def test_an_election_group_given_must_not_be_empty() -> None:
    """Before: group="" silently meant the Lease name."""
    with pytest.raises(ConfigError, match="group must not be empty"):
        LeaderElector("billing", namespace="default", identity="a", group="")
    with pytest.raises(ConfigError, match=r"Lease name 'a+' is 64 characters long: without group="):
        LeaderElector("a" * 64, namespace="default", identity="a")
    assert LeaderElector("a" * 64, namespace="default", identity="a", group="g").group == "g"


# -- wrong types are ConfigErrors at registration, naming the option ----------------------------


def partial_work(ctx: JobContext, extra: int) -> None:
    return None


#: values of the wrong type (typed Any: what an untyped caller passes)
FIVE: Any = 5
NONE: Any = None
A_STRING_TRIGGER: Any = "every 5"


@pytest.mark.parametrize(
    ("register", "message"),
    [
        (
            lambda: JobSpec(FIVE, work, Mode.ONCE_PER_TICK, None).validate(),
            "job name 5 must be a DNS label",
        ),
        (
            lambda: jobs().add(JobSpec(NONE, work, Mode.LEADER, None)),
            "job name None must be a DNS label",
        ),
        (lambda: jobs().cron("* * * * *", name=FIVE)(work), "job name 5 must be a DNS label"),
        (lambda: jobs().cron("* * * * *", name="")(work), "job name '' must be a DNS label"),
        (lambda: jobs().cron(FIVE)(work), "the cron expression must be a string of five fields"),
        (
            lambda: jobs().add(JobSpec("a", work, Mode.ONCE_PER_TICK, A_STRING_TRIGGER)),
            r"job 'a': trigger must be an APScheduler trigger \(a BaseTrigger",
        ),
        (
            lambda: jobs().cron("* * * * *")(functools.partial(partial_work, extra=1)),
            "has no __name__ to name its job after: pass name=",
        ),
    ],
)
def test_wrong_types_are_config_errors_at_registration(
    register: Callable[[], object], message: str
) -> None:
    """Before: TypeError, AttributeError, or (a string trigger) a LookupError from start()."""
    with pytest.raises(ConfigError, match=message):
        register()
