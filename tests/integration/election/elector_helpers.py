"""Helpers for the elector's integration tests: a Lease watcher that tests wait on, and electors
made on a test's server that are stopped (and their API clients closed) after the test."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from kubernetes import client

from k8slease import LeaderElector
from k8slease.clock import Clock, SystemClock
from k8slease.election.seams import Seams
from k8slease.errors import TransportError
from k8slease.lease.record import LeaseRecord, record_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.metrics import NoopMetrics

FAST: dict[str, Any] = {
    "lease_duration": 2,
    "renew_interval": 0.5,
    "renew_deadline": 1.5,
    "retry_interval": 1.0,
}


class LeaseWatcher:
    """Watches one Lease from the test's side and records (monotonic time, record) per change."""

    def __init__(
        self, api_client: Any, namespace: str, name: str, *, clock: Clock | None = None
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        self._transport = LeaseTransport(api_client, namespace, request_timeout=5)
        self.name = name
        self.cond = threading.Condition()
        self.history: list[tuple[float, LeaseRecord, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        since: str | None = None
        while not self._stop.is_set():
            try:
                for event in self._transport.watch(
                    name=self.name, resource_version=since, timeout_seconds=30
                ):
                    if event.type == "BOOKMARK":
                        continue
                    since = event.lease.get("metadata", {}).get("resourceVersion") or since
                    with self.cond:
                        self.history.append(
                            (self._clock.monotonic(), record_from_lease(event.lease), event.lease)
                        )
                        self.cond.notify_all()
            except TransportError:
                self._stop.wait(0.05)

    def close(self) -> None:
        self._stop.set()
        self._transport.close_watches()
        self._thread.join(timeout=5)

    @property
    def current(self) -> LeaseRecord | None:
        with self.cond:
            return self.history[-1][1] if self.history else None

    def wait_for(
        self, predicate: Callable[[LeaseRecord], bool], timeout: float, *, after: float = 0.0
    ) -> tuple[float, LeaseRecord]:
        """The first change at or after monotonic ``after`` whose record satisfies ``predicate``."""

        def found() -> tuple[float, LeaseRecord] | None:
            for at, record, _ in self.history:
                if at >= after and predicate(record):
                    return at, record
            return None

        with self.cond:
            assert self.cond.wait_for(lambda: found() is not None, timeout), (
                f"no matching Lease change within {timeout}s; last: {self.history[-1:]}"
            )
            result = found()
            assert result is not None
            return result


class ChildOutput:
    """A child process's stdout lines and stderr text, read as they come, so that a test can wait
    for the line a child prints when it reaches a state (instead of sleeping until it likely has).
    """

    def __init__(self, child: subprocess.Popen[str]) -> None:
        assert child.stdout is not None and child.stderr is not None
        self.child = child
        self.lines: list[str] = []
        self._stderr: list[str] = []
        self._eof = False
        self._cond = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read_lines, args=(child.stdout,), daemon=True),
            threading.Thread(target=self._read_all, args=(child.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_lines(self, stream: Any) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_all(self, stream: Any) -> None:
        self._stderr.append(stream.read())

    def wait_line(self, line: str, timeout: float) -> None:
        """Until the child has printed ``line``; fails the test on timeout or when it ends first."""
        with self._cond:
            self._cond.wait_for(lambda: line in self.lines or self._eof, timeout)
            if line not in self.lines:
                raise AssertionError(
                    f"the child did not print {line!r} within {timeout}s (ended: {self._eof}); "
                    f"stdout: {self.lines}; stderr: {self.stderr()}"
                )

    def end(self, timeout: float) -> str:
        """Wait for the child to end (``TimeoutExpired`` after ``timeout``); its stderr."""
        self.child.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=5)
        return self.stderr()

    def stderr(self) -> str:
        return "".join(self._stderr)


def server_for_lease(request: pytest.FixtureRequest, namespace: str, name: str) -> Any:
    """The test's server: a fresh embedded one per test, or the session's real control plane
    with the Lease ``namespace/name`` deleted first (so the test starts without it)."""
    shared = request.getfixturevalue("k8s_apiserver")
    if shared.embedded:
        return request.getfixturevalue("k8s_embedded_apiserver")
    with shared.api_client() as api_client:
        try:
            client.CoordinationV1Api(api_client).delete_namespaced_lease(name, namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    return shared


def tracked_elector(
    server: Any,
    things: list[Any],
    lease: str,
    identity: str,
    *,
    timing: Mapping[str, Any],
    clock: Clock | None = None,
    namespace: str = "default",
    **options: Any,
) -> LeaderElector:
    """An elector (no metrics, ``timing`` unless ``options`` says otherwise) for ``lease`` on an
    API client of its own to ``server``; both are added to ``things`` for
    :func:`stop_and_close` after the test."""
    api = server.api_client()
    things.append(api)
    settings: dict[str, Any] = {"metrics": NoopMetrics(), **timing, **options}
    made = LeaderElector(
        lease,
        namespace=namespace,
        identity=identity,
        api_client=api,
        seams=Seams(clock=clock),
        **settings,
    )
    things.append(made)
    return made


def stop_and_close(things: list[Any], *, stop_timeout: float) -> None:
    """After a test: stop its electors (``stop_timeout`` s each at most) and close the rest
    (API clients, watchers), the last made first."""
    for thing in reversed(things):
        if isinstance(thing, LeaderElector):
            thing.stop(timeout=stop_timeout)
        else:
            thing.close()
