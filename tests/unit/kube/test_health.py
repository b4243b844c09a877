"""The health endpoint answers from its check, on loopback."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable

from k8slease.kube.health import HealthServer


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def answer(state: dict[str, bool | None]) -> Callable[[], bool]:
    """A check answering ``state["now"]``, raising while it is None."""

    def check() -> bool:
        if state["now"] is None:
            raise RuntimeError("boom")
        return bool(state["now"])

    return check


def assert_follows(
    port: int, path: str, state: dict[str, bool | None], answers: list[tuple[bool | None, int]]
) -> None:
    """For each (value, code): with the check answering ``value`` (None: raising), ``path``
    answers ``code``."""
    for value, code in answers:
        state["now"] = value
        assert status(port, path) == code, (path, value)


def test_healthz_follows_the_check_and_a_raising_check_is_unhealthy() -> None:
    state: dict[str, bool | None] = {"now": True}
    check = answer(state)
    server = HealthServer(check, host="127.0.0.1", port=0).start()
    try:
        assert_follows(server.port, "/healthz", state, [(True, 200), (False, 503), (None, 503)])
        assert status(server.port, "/readyz") == 200
        assert status(server.port, "/nope") == 404
    finally:
        server.stop()


def test_readyz_follows_the_ready_callable() -> None:
    state: dict[str, bool | None] = {"now": False}
    ready = answer(state)
    server = HealthServer(lambda: True, ready=ready, host="127.0.0.1", port=0).start()
    try:
        assert_follows(server.port, "/readyz", state, [(False, 503), (True, 200), (None, 503)])
        assert status(server.port, "/healthz") == 200  # liveness is a separate question
    finally:
        server.stop()
