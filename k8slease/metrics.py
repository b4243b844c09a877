"""Optional Prometheus metrics for the elector; no-ops when prometheus-client is not installed.

Metrics (all labelled by ``lease`` and, where it is about this replica, ``identity``):

* ``k8slease_is_leader`` (gauge): 1 while this replica leads, else 0;
* ``k8slease_leader_transitions_total`` (counter): times this replica started or stopped leading,
  labelled ``event`` = ``started``/``stopped``;
* ``k8slease_renew_seconds`` (histogram): latency of successful renews;
* ``k8slease_request_failures_total`` (counter): failed Lease requests, labelled ``op``
  (observe, take, renew, release...) and ``reason`` (conflict, unavailable, forbidden...).

The collectors are created once per registry and shared by every elector in the process.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class ElectorMetrics(Protocol):
    """What the elector reports; implement it to send metrics elsewhere."""

    def set_leader(self, lease: str, identity: str, leading: bool) -> None:
        """This replica started (``True``) or stopped (``False``) leading ``lease``."""
        ...

    def renewed(self, lease: str, seconds: float) -> None:
        """A renew of ``lease`` succeeded after ``seconds``."""
        ...

    def failed(self, lease: str, op: str, reason: str) -> None:
        """A request for ``lease`` failed."""
        ...


class NoopMetrics:
    """Metrics that go nowhere."""

    def set_leader(self, lease: str, identity: str, leading: bool) -> None:
        return None

    def renewed(self, lease: str, seconds: float) -> None:
        return None

    def failed(self, lease: str, op: str, reason: str) -> None:
        return None


_collectors_lock = threading.Lock()
_collectors: dict[int, tuple[Any, Any, Any, Any]] = {}


class PrometheusMetrics:
    """Metrics in a prometheus-client registry (the default registry unless one is given)."""

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client

        if registry is None:
            registry = prometheus_client.REGISTRY
        with _collectors_lock:
            collectors = _collectors.get(id(registry))
            if collectors is None:
                collectors = (
                    prometheus_client.Gauge(
                        "k8slease_is_leader",
                        "1 while this replica leads the Lease, else 0",
                        ["lease", "identity"],
                        registry=registry,
                    ),
                    prometheus_client.Counter(
                        "k8slease_leader_transitions_total",
                        "Times this replica started or stopped leading",
                        ["lease", "event"],
                        registry=registry,
                    ),
                    prometheus_client.Histogram(
                        "k8slease_renew_seconds",
                        "Latency of successful Lease renewals",
                        ["lease"],
                        registry=registry,
                    ),
                    prometheus_client.Counter(
                        "k8slease_request_failures_total",
                        "Failed Lease requests by operation and reason",
                        ["lease", "op", "reason"],
                        registry=registry,
                    ),
                )
                _collectors[id(registry)] = collectors
        self._gauge: Any = collectors[0]
        self._transitions: Any = collectors[1]
        self._renew: Any = collectors[2]
        self._failures: Any = collectors[3]

    def set_leader(self, lease: str, identity: str, leading: bool) -> None:
        self._gauge.labels(lease=lease, identity=identity).set(1 if leading else 0)
        self._transitions.labels(lease=lease, event="started" if leading else "stopped").inc()

    def renewed(self, lease: str, seconds: float) -> None:
        self._renew.labels(lease=lease).observe(seconds)

    def failed(self, lease: str, op: str, reason: str) -> None:
        self._failures.labels(lease=lease, op=op, reason=reason).inc()


def default_metrics() -> ElectorMetrics:
    """Prometheus metrics in the default registry if prometheus-client is installed, else no-ops."""
    try:
        return PrometheusMetrics()
    except ImportError:
        return NoopMetrics()
