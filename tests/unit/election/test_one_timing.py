"""One timing object from ``Jobs`` to the elector, test seams apart from the user's settings,
and one request timeout per ``Jobs`` group (issue 24)."""

from __future__ import annotations

import inspect
import random
from typing import Any

import kubernetes.client
import pytest

from k8slease import ConfigError, ElectionTiming, Jobs, LeaderElector
from k8slease.election.seams import Seams
from k8slease.jobs import registry
from k8slease.metrics import NoopMetrics
from tests.unit.election.elector_memstore import MemoryLeaseStore, MemoryTransport

SEAMS = Seams(transport=MemoryTransport(MemoryLeaseStore()))


def elector(**options: Any) -> LeaderElector:
    return LeaderElector("demo", identity="a", metrics=NoopMetrics(), seams=SEAMS, **options)


# -- one timing object ---------------------------------------------------------------------------


def test_an_elector_holds_the_timing_it_was_given_and_builds_the_same_from_keywords() -> None:
    timing = ElectionTiming(lease_duration=15, renew_deadline=10, retry_interval=2)
    assert elector(timing=timing).timing is timing
    loose = elector(lease_duration=15, renew_deadline=10, retry_interval=2).timing
    assert loose == timing
    assert (loose.renew_interval, loose.request_timeout) == (5.0, pytest.approx(10 / 3))


def test_timing_and_timing_keywords_together_are_refused_naming_the_keywords() -> None:
    timing = ElectionTiming()
    with pytest.raises(ConfigError, match=r"timing= or as lease_duration=, request_timeout=, not"):
        elector(timing=timing, lease_duration=60, request_timeout=5)
    with pytest.raises(ConfigError, match=r"timing must be an ElectionTiming, got \{"):
        elector(timing={"lease_duration": 60})


@pytest.mark.parametrize(
    "bad",
    [
        {"lease_duration": 0},
        {"lease_duration": 2.5},
        {"renew_interval": 30, "renew_deadline": 20},
        {"request_timeout": 50},
    ],
)
def test_a_bad_timing_raises_the_same_error_from_every_public_form(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError) as direct:
        ElectionTiming(**bad)
    with pytest.raises(ConfigError) as keywords:
        elector(**bad)
    assert str(keywords.value) == str(direct.value)


def test_jobs_hands_its_timing_object_to_the_elector_validated_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[dict[str, Any]] = []
    validate = ElectionTiming.__init__

    def counting(self: ElectionTiming, **options: Any) -> None:
        built.append(options)
        validate(self, **options)

    monkeypatch.setattr(ElectionTiming, "__init__", counting)
    timing = ElectionTiming(lease_duration=15, renew_interval=5, renew_deadline=10)
    jobs = Jobs("billing", namespace="default", identity="a", election=timing)

    class Unstarted(LeaderElector):
        def start(self) -> LeaderElector:  # the election itself is not under test here
            return self

    monkeypatch.setattr(registry, "LeaderElector", Unstarted)
    jobs._start_election(kubernetes.client.ApiClient())
    assert jobs.elector is not None and jobs.elector.timing is timing
    assert len(built) == 1, f"ElectionTiming built {len(built)} times: {built}"


# -- seams: what only tests and integrations replace ----------------------------------------------


def test_the_elector_signature_lists_settings_and_groups_the_test_seams() -> None:
    keywords = set(inspect.signature(LeaderElector).parameters)
    assert {"timing", "lease_duration", "metrics", "seams"} <= keywords
    assert not keywords & {"clock", "transport", "rng"}
    with pytest.raises(TypeError, match="clock"):
        LeaderElector("demo", clock=None)  # type: ignore[call-arg]


def test_seams_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"seams must be a Seams, got \{'clock': None\}"):
        elector_options: dict[str, Any] = {"seams": {"clock": None}}
        LeaderElector("demo", identity="a", metrics=NoopMetrics(), **elector_options)
    with pytest.raises(ConfigError, match=r"rng must be a random\.Random, got 7"):
        Seams(rng=7)  # type: ignore[arg-type]
    assert Seams(rng=random.Random(1)).rng is not None


def test_the_seams_transport_is_the_one_the_elector_uses() -> None:
    store = MemoryLeaseStore()
    made = LeaderElector(
        "demo",
        identity="a",
        metrics=NoopMetrics(),
        handle_signals=False,
        seams=Seams(transport=MemoryTransport(store)),
        lease_duration=3,
        renew_interval=0.5,
        renew_deadline=2,
    ).start()
    try:
        assert made.wait_until_leading(5)
        assert store.get("demo")["spec"]["holderIdentity"] == "a"
    finally:
        made.stop(timeout=5)


# -- one request timeout per Jobs group -----------------------------------------------------------


def jobs(**options: Any) -> Jobs:
    return Jobs("billing", namespace="default", identity="a", **options)


def test_jobs_has_one_request_timeout_the_election_timings() -> None:
    assert jobs().request_timeout == jobs().election.timeout == 10.0
    given = jobs(request_timeout=2)
    assert given.request_timeout == given.election.timeout == 2.0
    short = ElectionTiming(lease_duration=15, renew_interval=5, renew_deadline=10)
    derived = jobs(election=short)
    assert derived.election is short and derived.request_timeout == short.timeout
    assert jobs(election=short, request_timeout=short.timeout).election is short


def test_jobs_refuses_two_different_request_timeouts_naming_both() -> None:
    short = ElectionTiming(lease_duration=15, renew_interval=5, renew_deadline=10)
    with pytest.raises(ConfigError, match=r"request_timeout=2 differs from election\.request_t"):
        jobs(election=short, request_timeout=2)
    with pytest.raises(ConfigError, match=r"request_timeout \(45s\) must be shorter than renew_"):
        jobs(request_timeout=45)
