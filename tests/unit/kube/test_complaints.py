"""A persistent request error is logged once with what to do, then only counted."""

from __future__ import annotations

import random
from typing import Any

import pytest

from k8slease.errors import Forbidden, NotFound, Unavailable
from k8slease.kube.backoff import backoff_delay
from k8slease.kube.complaints import RepeatedErrors


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def log(event: str, **fields: Any) -> None:
            self.lines.append((level, event, fields))

        return log


def test_a_missing_namespace_is_logged_once_with_a_hint_then_counted() -> None:
    log = Recorder()
    errors = RepeatedErrors(log, namespace="shop")
    for _ in range(100):
        errors.failed("create", NotFound("namespaces shop not found", status=404))
    warnings = [line for line in log.lines if line[0] == "warning"]
    assert len(warnings) == 1
    assert "namespace 'shop' does not exist" in warnings[0][2]["hint"]
    assert log.lines[-1][0] == "debug" and log.lines[-1][2]["failures"] == 100
    errors.succeeded("create")
    assert log.lines[-1][:2] == ("info", "request.recovered")
    assert log.lines[-1][2]["failures"] == 100
    errors.failed("create", NotFound("again", status=404))
    assert log.lines[-1][0] == "warning", "after a recovery, a new failure is news again"


def test_forbidden_names_the_rbac_to_grant_and_a_new_kind_is_logged_again() -> None:
    log = Recorder()
    errors = RepeatedErrors(log, namespace="shop")
    errors.failed("observe", Forbidden("leases is forbidden", status=403))
    errors.failed("observe", Forbidden("leases is forbidden", status=403))
    errors.failed("observe", Unavailable("503", status=503))
    levels = [line[0] for line in log.lines]
    assert levels == ["warning", "debug", "warning"]
    assert "RBAC" in log.lines[0][2]["hint"]
    assert "elector.bindings[].jobs" in log.lines[0][2]["hint"], "a narrowed Role's cause too"
    assert "hint" not in log.lines[2][2], "a transient error has no advice"


@pytest.mark.parametrize("attempt", range(1, 12))
def test_backoff_doubles_up_to_the_cap_with_jitter(attempt: int) -> None:
    rng = random.Random(attempt)
    ceiling = min(5.0, 0.5 * 2 ** (attempt - 1))
    for _ in range(50):
        delay = backoff_delay(attempt, initial=0.5, cap=5.0, rng=rng)
        assert ceiling / 2 <= delay <= ceiling
