"""The delaying proxy in front of an API server: an elector keeps leading through a slow spell
that fails every request bounded by request_timeout (issue 22)."""

from __future__ import annotations

import threading

import kubernetes
import pytest

from k8slease import LeaderElector
from k8slease.errors import Unavailable
from k8slease.lease.transport import LeaseTransport
from k8slease.metrics import NoopMetrics
from k8slease.testing.server import APIServer
from k8slease.testing.slowproxy import DelayProxy


@pytest.mark.embedded_only  # proxies an embedded server of its own
@pytest.mark.timeout(60)
def test_an_elector_behind_the_proxy_holds_through_a_slow_spell() -> None:
    # plain HTTP: each new TLS connection would cost the proxy's delay once more per round trip
    # of its handshake, which measures the handshake, not the request budgets under test
    with APIServer(tls=False) as server, DelayProxy(("127.0.0.1", server.port)) as proxy:
        config = kubernetes.client.Configuration()
        config.host = f"http://127.0.0.1:{proxy.port}"
        config.api_key = {"authorization": f"Bearer {server.token}"}
        api = kubernetes.client.ApiClient(config)
        stopped = threading.Event()
        elector = LeaderElector(
            "proxied",
            namespace="default",
            identity="a",
            api_client=api,
            metrics=NoopMetrics(),
            lease_duration=4,
            renew_interval=0.5,
            renew_deadline=3,  # request_timeout 1 s; tolerated latency 1.5 s
            retry_interval=0.5,
            on_stopped_leading=stopped.set,
        ).start()
        try:
            assert elector.wait_until_leading(5)
            proxy.slow(1.25, duration=6)
            # bounded by request_timeout, a request through the proxy now fails
            with pytest.raises(Unavailable, match="timed out"):
                LeaseTransport(api, "default", request_timeout=1.0).get("proxied")
            assert not stopped.wait(6), "the leader held through the spell"
            assert elector.is_leader and proxy.connections >= 1
        finally:
            elector.stop(timeout=10)
            api.close()
