"""``Jobs`` in a namespace that does not exist (issue 21): a bare ``LeaderElector`` there warns
with a hint; ``Jobs`` did not (every tick was a DEBUG "lost-race") and said ready and healthy.
Now the first refused claim is a WARNING naming the namespace with what to do, the tick is
skipped (even with ``fail_open``: the API server answered), and ``ready()``/``healthy()`` are
false until a claim works."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import pytest
from kubernetes import client

from k8slease import JobContext, Mode
from tests.support.factories import make_jobs

TICK = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.mark.parametrize("fail_open", [False, True])
def test_jobs_in_a_missing_namespace_warn_with_a_hint_and_are_not_ready(
    k8s_api_client: client.ApiClient, caplog: pytest.LogCaptureFixture, fail_open: bool
) -> None:
    namespace = f"absent-{uuid.uuid4().hex[:8]}"
    jobs = make_jobs(
        "nowhere", k8s_api_client, identity="a", namespace=namespace, handle_signals=False
    )
    ran: list[datetime] = []

    @jobs.cron("0 0 1 1 *", mode=Mode.ONCE_PER_TICK, fail_open=fail_open)
    def report(ctx: JobContext) -> None:
        ran.append(ctx.tick)

    with caplog.at_level(logging.WARNING, logger="k8slease"), jobs:
        assert jobs.fire("report", TICK) is None
        assert not jobs.ready()
        assert not jobs.healthy()
    assert ran == [], "no tick runs without its lock"
    warnings = [r.getMessage() for r in caplog.records if "namespace_missing" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert namespace in warnings[0]
    assert "does not exist: create it" in warnings[0]


def test_jobs_become_ready_once_the_namespace_exists(
    k8s_api_client: client.ApiClient,
) -> None:
    namespace = f"late-{uuid.uuid4().hex[:8]}"
    jobs = make_jobs(
        "later", k8s_api_client, identity="a", namespace=namespace, handle_signals=False
    )

    @jobs.cron("0 0 1 1 *", mode=Mode.ONCE_PER_TICK)
    def report(ctx: JobContext) -> None: ...

    core = client.CoreV1Api(k8s_api_client)
    with jobs:
        assert jobs.fire("report", TICK) is None
        assert not jobs.ready()
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        try:
            assert jobs.fire("report", TICK) == "succeeded"
            assert jobs.ready() and jobs.healthy()
        finally:
            core.delete_namespace(namespace)
