"""``/metrics`` on the health server: the exposition format, or 501 without prometheus-client."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from k8slease.kube.health import HealthServer
from k8slease.metrics import PrometheusJobMetrics, PrometheusMetrics


def get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            body = response.read().decode()
            return int(response.status), response.headers["Content-Type"], body
    except urllib.error.HTTPError as error:
        return int(error.code), error.headers["Content-Type"], error.read().decode()


def test_metrics_are_served_with_stable_labels() -> None:
    registry = CollectorRegistry()
    PrometheusMetrics(registry).set_leader("billing", True)
    PrometheusJobMetrics(registry).skipped("billing", "nightly", "locked")
    server = HealthServer(lambda: True, host="127.0.0.1", port=0, registry=registry).start()
    try:
        code, content_type, body = get(server.port, "/metrics")
    finally:
        server.stop()
    assert code == 200 and content_type.startswith("text/plain; version=")
    assert 'k8slease_is_leader{lease="billing"} 1.0' in body
    assert 'leader_election_master_status{name="billing"} 1.0' in body
    assert 'k8slease_job_skips_total{group="billing",job="nightly",reason="locked"} 1.0' in body
    assert "identity" not in body


def test_without_prometheus_client_metrics_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import raises ImportError
    server = HealthServer(lambda: True, host="127.0.0.1", port=0).start()
    try:
        code, _, body = get(server.port, "/metrics")
    finally:
        server.stop()
    assert code == 501
    assert "pip install 'k8slease[metrics]'" in body
