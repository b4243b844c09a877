"""Optional Prometheus metrics for jobs; no-ops when prometheus-client is not installed.

* ``k8slease_job_runs_total`` (counter): runs on this replica, labelled ``group``, ``job`` and
  ``outcome`` (succeeded, failed, lost);
* ``k8slease_job_skips_total`` (counter): ticks this replica skipped, labelled ``reason``
  (locked, not-leader, api-unreachable); a skip is normal, this is how you see how often;
* ``k8slease_job_run_seconds`` (histogram): how long runs took.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class JobMetrics(Protocol):
    """What the job runner reports; implement it to send metrics elsewhere."""

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None: ...

    def skipped(self, group: str, job: str, reason: str) -> None: ...


class NoopJobMetrics:
    """Job metrics that go nowhere."""

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None:
        return None

    def skipped(self, group: str, job: str, reason: str) -> None:
        return None


_lock = threading.Lock()
_collectors: dict[int, tuple[Any, Any, Any]] = {}


class PrometheusJobMetrics:
    """Job metrics in a prometheus-client registry (the default one unless given)."""

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client

        registry = registry if registry is not None else prometheus_client.REGISTRY
        with _lock:
            found = _collectors.get(id(registry))
            if found is None:
                found = (
                    prometheus_client.Counter(
                        "k8slease_job_runs_total",
                        "Job runs on this replica by outcome",
                        ["group", "job", "outcome"],
                        registry=registry,
                    ),
                    prometheus_client.Counter(
                        "k8slease_job_skips_total",
                        "Ticks this replica skipped, by reason",
                        ["group", "job", "reason"],
                        registry=registry,
                    ),
                    prometheus_client.Histogram(
                        "k8slease_job_run_seconds",
                        "Duration of job runs",
                        ["group", "job"],
                        registry=registry,
                    ),
                )
                _collectors[id(registry)] = found
        self._runs: Any = found[0]
        self._skips: Any = found[1]
        self._seconds: Any = found[2]

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None:
        self._runs.labels(group=group, job=job, outcome=outcome).inc()
        self._seconds.labels(group=group, job=job).observe(seconds)

    def skipped(self, group: str, job: str, reason: str) -> None:
        self._skips.labels(group=group, job=job, reason=reason).inc()


def default_job_metrics() -> JobMetrics:
    """Prometheus metrics in the default registry if prometheus-client is installed, else no-ops."""
    try:
        return PrometheusJobMetrics()
    except ImportError:
        return NoopJobMetrics()
