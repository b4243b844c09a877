"""Bad job options fail at registration with a message that names the option."""

from __future__ import annotations

import pytest

from k8slease import ConfigError, JobContext, Jobs, Mode


def noop(ctx: JobContext) -> None: ...


@pytest.fixture
def jobs() -> Jobs:
    return Jobs("billing", namespace="default", identity="me")


@pytest.mark.parametrize(
    ("register", "message"),
    [
        (lambda j: j.cron("61 * * * *"), "invalid cron expression '61 * * * *'"),
        (
            lambda j: j.cron("0 2 * * *", lock_at_most_for=0.5),
            "lock_at_most_for must be a finite number of seconds >= 1",
        ),
        (
            lambda j: j.cron("0 2 * * *", lock_at_most_for=60, lock_at_least_for=120),
            "lock_at_least_for must be between 0 and lock_at_most_for",
        ),
        (lambda j: j.cron("0 2 * * *", grace=-1), "grace must be a finite number of seconds >= 0"),
        (lambda j: j.cron("0 2 * * *", name="Nightly_Invoices"), "must be a DNS label"),
        (lambda j: j.interval(seconds=0), "longer than 0 seconds"),
        (
            lambda j: j.cron("0 2 * * *", mode=Mode.EVERY_REPLICA, fail_open=True),
            "fail_open only applies to coordinated jobs",
        ),
        (lambda j: j.singleton(mode=Mode.ONCE_PER_TICK), "cannot be ONCE_PER_TICK"),
    ],
)
def test_bad_options_are_refused_with_a_specific_message(
    jobs: Jobs, register: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        register(jobs)(noop)  # type: ignore[operator]


def test_names_come_from_functions_and_must_be_unique(jobs: Jobs) -> None:
    jobs.cron("0 2 * * *")(noop)
    assert list(jobs.specs) == ["noop"]
    with pytest.raises(ConfigError, match="already registered"):
        jobs.interval(minutes=5)(noop)


def test_group_names_must_make_valid_lease_names() -> None:
    with pytest.raises(ConfigError, match="group 'Billing Team' is not a DNS label"):
        Jobs("Billing Team")
    with pytest.raises(ConfigError, match=r"must not contain '\.'"):
        Jobs("billing.eu")


def test_a_scheduler_must_be_an_apscheduler_3_scheduler() -> None:
    with pytest.raises(ConfigError, match="APScheduler 3 scheduler"):
        Jobs("billing", scheduler=object())  # type: ignore[arg-type]
