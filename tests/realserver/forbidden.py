"""Which of k8slease's own requests the API server refused with 403, as they happen.

Every request k8slease makes goes through :func:`k8slease.kube.rawapi.send` (Leases, watches,
Events); :func:`record_forbidden` wraps it for one test, so a test can wait for "the elector's
watch was refused" instead of guessing from timing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import k8slease.kube.rawapi
import k8slease.lease.transport
from k8slease.errors import Forbidden
from tests.support.recorders import Journal


class ForbiddenCalls(Journal[tuple[str, str]]):
    """(verb, path) of every request answered 403 (``entries``), with a way to wait for one."""

    def wait(self, verb: str, path_part: str, timeout: float = 15.0) -> tuple[str, str]:
        """The first refused ``verb`` (any verb when empty) whose path contains ``path_part``;
        fails after timeout."""

        def found() -> tuple[str, str] | None:
            matching = (c for c in self.entries if (not verb or c[0] == verb) and path_part in c[1])
            return next(matching, None)

        self.within(lambda _: found() is not None, timeout)
        call = found()
        assert call is not None, f"no {verb} of {path_part} was refused; refused: {self.entries}"
        return call


def record_forbidden(monkeypatch: pytest.MonkeyPatch) -> ForbiddenCalls:
    """Record k8slease's refused requests for the rest of the test."""
    calls = ForbiddenCalls()
    original: Callable[..., Any] = k8slease.kube.rawapi.send

    def send(api_client: Any, verb: str, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return original(api_client, verb, method, path, **kwargs)
        except Forbidden:
            calls.add((verb, path))
            raise

    monkeypatch.setattr(k8slease.kube.rawapi, "send", send)
    monkeypatch.setattr(k8slease.lease.transport, "send", send)
    return calls
