"""Optional Prometheus metrics for elections and jobs; no-ops when prometheus-client is missing.

Labels are stable across restarts, as Prometheus and client-go expect: the Lease name, the
group, the job, never a per-process identity (a random identity would make a new series on every
restart). Election metrics (labelled ``lease``):

* ``k8slease_is_leader`` (gauge): 1 while this replica leads, else 0 (exported by every
  elector from its start);
* ``leader_election_master_status`` (gauge, label ``name`` = the Lease name): the same value
  under client-go's name, so its dashboards and alerts work unchanged;
* ``k8slease_leader_transitions_total`` (counter): times this replica started or stopped leading,
  labelled ``event`` = ``started``/``stopped``;
* ``k8slease_renew_seconds`` (histogram): latency of successful renews;
* ``k8slease_request_failures_total`` (counter): failed Lease requests, labelled ``op``
  (observe, create, take, renew, release...) and ``reason`` (conflict, unavailable, forbidden...).

Job metrics (labelled ``group`` and ``job``):

* ``k8slease_job_runs_total`` (counter): runs on this replica, labelled ``outcome`` (succeeded,
  failed, lost);
* ``k8slease_job_skips_total`` (counter): ticks this replica skipped, labelled ``reason``
  (locked, not-leader, api-unreachable, api-refused); a skip is normal, this is how you see
  how often;
* ``k8slease_job_run_seconds`` (histogram): how long runs took.

Each collector is created once per registry and shared by every elector and job in the process.
:class:`~k8slease.HealthServer` serves them on ``/metrics``. The table in docs/operations.md is
the reference.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

#: name -> (kind, help, label names)
_SPECS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "k8slease_is_leader": ("Gauge", "1 while this replica leads the Lease, else 0", ("lease",)),
    "leader_election_master_status": (
        "Gauge",
        "client-go's name: 1 while this replica leads the Lease 'name', else 0",
        ("name",),
    ),
    "k8slease_leader_transitions_total": (
        "Counter",
        "Times this replica started or stopped leading",
        ("lease", "event"),
    ),
    "k8slease_renew_seconds": ("Histogram", "Latency of successful Lease renewals", ("lease",)),
    "k8slease_request_failures_total": (
        "Counter",
        "Failed Lease requests by operation and reason",
        ("lease", "op", "reason"),
    ),
    "k8slease_job_runs_total": (
        "Counter",
        "Job runs on this replica by outcome",
        ("group", "job", "outcome"),
    ),
    "k8slease_job_skips_total": (
        "Counter",
        "Ticks this replica skipped, by reason",
        ("group", "job", "reason"),
    ),
    "k8slease_job_run_seconds": ("Histogram", "Duration of job runs", ("group", "job")),
}

_collectors_lock = threading.Lock()
_collectors: dict[tuple[int, str], Any] = {}


def _collector(registry: Any, name: str) -> Any:
    """The collector ``name`` in ``registry`` (default: prometheus-client's), made once."""
    import prometheus_client

    registry = registry if registry is not None else prometheus_client.REGISTRY
    kind, help_text, labels = _SPECS[name]
    with _collectors_lock:
        found = _collectors.get((id(registry), name))
        if found is None:
            make = getattr(prometheus_client, kind)
            found = make(name, help_text, list(labels), registry=registry)
            _collectors[(id(registry), name)] = found
        return found


class ElectorMetrics(Protocol):
    """What the elector reports; implement it to send metrics elsewhere."""

    def set_leader(self, lease: str, leading: bool) -> None:
        """This replica started (``True``) or stopped (``False``) leading ``lease``."""
        ...

    def renewed(self, lease: str, seconds: float) -> None:
        """A renew of ``lease`` succeeded after ``seconds``."""
        ...

    def failed(self, lease: str, op: str, reason: str) -> None:
        """A request for ``lease`` failed."""
        ...


class JobMetrics(Protocol):
    """What the job runner reports; implement it to send metrics elsewhere."""

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None: ...

    def skipped(self, group: str, job: str, reason: str) -> None: ...


class NoopMetrics:
    """Election metrics that go nowhere."""

    def set_leader(self, lease: str, leading: bool) -> None:
        return None

    def renewed(self, lease: str, seconds: float) -> None:
        return None

    def failed(self, lease: str, op: str, reason: str) -> None:
        return None


class NoopJobMetrics:
    """Job metrics that go nowhere."""

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None:
        return None

    def skipped(self, group: str, job: str, reason: str) -> None:
        return None


class PrometheusMetrics:
    """Election metrics in a prometheus-client registry (the default registry unless given)."""

    def __init__(self, registry: Any = None) -> None:
        self._gauge = _collector(registry, "k8slease_is_leader")
        self._master = _collector(registry, "leader_election_master_status")
        self._transitions = _collector(registry, "k8slease_leader_transitions_total")
        self._renew = _collector(registry, "k8slease_renew_seconds")
        self._failures = _collector(registry, "k8slease_request_failures_total")

    def set_leader(self, lease: str, leading: bool) -> None:
        self._gauge.labels(lease=lease).set(1 if leading else 0)
        self._master.labels(name=lease).set(1 if leading else 0)
        self._transitions.labels(lease=lease, event="started" if leading else "stopped").inc()

    def not_leading(self, lease: str) -> None:
        """Export the gauges as 0 (no transition counted): called when an elector starts, so
        candidates that never led have a series for "nobody leads" alerts to look at."""
        self._gauge.labels(lease=lease).set(0)
        self._master.labels(name=lease).set(0)

    def renewed(self, lease: str, seconds: float) -> None:
        self._renew.labels(lease=lease).observe(seconds)

    def failed(self, lease: str, op: str, reason: str) -> None:
        self._failures.labels(lease=lease, op=op, reason=reason).inc()


class PrometheusJobMetrics:
    """Job metrics in a prometheus-client registry (the default registry unless given)."""

    def __init__(self, registry: Any = None) -> None:
        self._runs = _collector(registry, "k8slease_job_runs_total")
        self._skips = _collector(registry, "k8slease_job_skips_total")
        self._seconds = _collector(registry, "k8slease_job_run_seconds")

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None:
        self._runs.labels(group=group, job=job, outcome=outcome).inc()
        self._seconds.labels(group=group, job=job).observe(seconds)

    def skipped(self, group: str, job: str, reason: str) -> None:
        self._skips.labels(group=group, job=job, reason=reason).inc()


def default_metrics() -> ElectorMetrics:
    """Prometheus metrics in the default registry if prometheus-client is installed, else no-ops."""
    try:
        return PrometheusMetrics()
    except ImportError:
        return NoopMetrics()


def default_job_metrics() -> JobMetrics:
    """Like :func:`default_metrics`, for jobs."""
    try:
        return PrometheusJobMetrics()
    except ImportError:
        return NoopJobMetrics()
