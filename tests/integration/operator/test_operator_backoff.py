"""Failing status writes back off: the patch rate drops while the API server keeps refusing them,
and the status is written once it accepts them again (the operator's write loop, in-process,
against the embedded API server with fault injection)."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.names import (
    CRD_GROUP,
    CRD_KIND,
    CRD_PLURAL,
    CRD_VERSION,
    LABEL_GROUP,
    LABEL_ROLE,
    ROLE_LEADER,
)
from k8slease.operator.crd import install_crd
from k8slease.operator.settings import OperatorConfig
from k8slease.operator.writeloop import OperatorRuntime
from k8slease.testing.server import APIServer

NS = "backoff"
STATUS = "scheduledjobgroups/status"


def _lease(group: str, holder: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    record = LeaseRecord(holder, 15, now, now, 0, 1)
    labels = {LABEL_GROUP: group, LABEL_ROLE: ROLE_LEADER}
    return new_lease(group, NS, record, labels=labels)


def _patches(server: APIServer) -> int:
    return server.stats.count("patch", STATUS)


def _accepted(server: APIServer) -> bool:
    """Whether the server has accepted a status patch."""
    return any(
        r.verb == "patch" and r.resource.endswith("/status") and r.code < 400
        for r in server.stats.requests()
    )


def _patch_times(server: APIServer, start: float, until: float) -> list[float]:
    """When (seconds since ``start``) the server served each status patch, until ``until``."""
    seen: list[float] = []
    count = _patches(server)
    while (left := until - time.monotonic()) > 0:
        if server.stats.wait_until(lambda n=count: _patches(server) > n, left):
            now = _patches(server)
            seen.extend([time.monotonic() - start] * (now - count))
            count = now
    return seen


async def _run(server: APIServer, settings: OperatorConfig, seconds: float) -> list[float]:
    """Run the write loop for ``seconds`` with every status patch refused; patch times seen."""
    api = server.api_client()
    runtime = OperatorRuntime(settings, api_client=api)
    obj: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        CRD_GROUP,
        CRD_VERSION,
        NS,
        CRD_PLURAL,
        {
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
            "kind": CRD_KIND,
            "metadata": {"name": "g"},
            "spec": {},
        },
    )
    await runtime.start()
    fault = server.faults.add("patch", STATUS, status=500)
    try:
        runtime.on_object("ADDED", obj)
        runtime.on_lease("ADDED", _lease("g", "replica-a"))
        start = time.monotonic()
        # the span of time the patches are counted over is the scenario; each is seen as served
        seen = await asyncio.to_thread(_patch_times, server, start, start + seconds)
        server.faults.remove(fault)
        assert await asyncio.to_thread(
            server.stats.wait_until, lambda: _accepted(server), 10 * settings.write_backoff_max
        ), "the status is written once the server accepts it"
        written = client.CustomObjectsApi(api).get_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, NS, CRD_PLURAL, "g"
        )
        assert written.get("status", {}).get("leader") == "replica-a", written
        return seen
    finally:
        await runtime.stop()
        api.close()


def test_refused_status_patches_back_off() -> None:
    settings = OperatorConfig(
        namespaces=(NS,),
        flush_interval=0.02,
        min_write_interval=0.05,
        evaluate_interval=0.2,
        write_backoff_initial=0.2,
        write_backoff_max=0.8,
    )
    with APIServer() as server:
        api = server.api_client()
        install_crd(api)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        api.close()
        attempts = asyncio.run(_run(server, settings, seconds=4.0))
    # Without backoff a refused write was retried every min_write_interval (+ flush): ~50 in 4 s.
    # With it the waits are 0.1-0.2 s, 0.2-0.4 s, then 0.4-0.8 s (capped): at most ~12 in 4 s.
    assert 4 <= len(attempts) <= 14, attempts
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # never sooner than the jittered floor of the backoff (the loop may only be later)
    assert all(gap >= 0.38 for gap in gaps[2:]), gaps
    assert max(gaps) <= 2.0, gaps  # capped at 0.8 s, plus generous slack for a busy machine
