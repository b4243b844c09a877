"""What every part of the benchmark shares: the lease settings, quiet logging, statistics."""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import structlog

IMPLEMENTATIONS = ("k8slease", "clientgo", "official")
NAMESPACE = "default"


@dataclass(frozen=True)
class LeaseSettings:
    """The same election timing for every implementation (seconds).

    client-go's ``RetryPeriod`` and the official client's ``retry_period`` are both their renew
    period and their candidates' poll period; k8slease's ``renew_interval`` and
    ``retry_interval`` are set to the same value.
    """

    lease_duration: float = 4.0
    renew_deadline: float = 3.0
    renew_interval: float = 1.0
    retry_interval: float = 1.0


SETTINGS = LeaseSettings()


def replica_args(description: str, argv: list[str] | None) -> argparse.Namespace:
    """The options every replica script takes, parsed; logging is quietened too."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--identity", required=True)
    args = parser.parse_args(argv)
    quiet_logging()
    return args


def quiet_logging() -> None:
    """Send only warnings (k8slease's structlog and the stdlib) to stderr; stdout is for data."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # Many threads on one ApiClient overflow its pool of 10: noted in the docs, not per request.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)


def emit(event: str, **fields: Any) -> None:
    """Print one JSON line (a replica's report to the harness) with the wall-clock time."""
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: list[float]) -> dict[str, float]:
    """n, median, p95, min, max and mean of ``values``."""
    if not values:
        return {"n": 0.0}
    return {
        "n": float(len(values)),
        "median": statistics.median(values),
        "p95": percentile(values, 0.95),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
    }
