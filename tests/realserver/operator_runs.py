"""The operator (tests/support/operators.py) with a given kubeconfig (an account's token), and
what the tests wait for: a log line (read from the operator's output as it comes), a status
field, an Event (each re-checked on every change a watch reports)."""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes.client
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION
from tests.support.operators import start_operator, stop_process, wait_for

#: How an operator log shows a request the API server refused: the word, or 403 as a status
#: (``status=403``, ``(403)``, ``403, message=...``), not three digits inside another number
#: (a log time's milliseconds, ``06:35:07,403``, failed a CI run), a duration or a name
REFUSED = re.compile(r"(?<![\w,.:-])403(?![\w.])|[Ff]orbidden")


#: Seconds a watch stays open before the wait checks again that the operator still runs.
WATCH_WINDOW = 2


def wait_changes(
    what: str, probe: Callable[[], Any], changes: Callable[[int], Iterable[Any]], timeout: float
) -> Any:
    """:func:`~tests.support.operators.wait_for` with watches reopened every
    :data:`WATCH_WINDOW` s, so that a probe checking the operator still runs notices its exit."""
    return wait_for(what, probe, changes=changes, timeout=timeout, window=WATCH_WINDOW)


class OperatorRun:
    """One operator process and its log (its output, copied to ``log`` line by line)."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path, namespace: str) -> None:
        self.process = process
        self.log = log
        self.namespace = namespace
        self._lines: list[str] = []
        self._ended = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._copy, name="operator-log", daemon=True)
        self._reader.start()

    def _copy(self) -> None:
        assert self.process.stdout is not None
        with self.log.open("wb") as out:
            for raw in self.process.stdout:
                out.write(raw)
                out.flush()
                with self._cond:
                    self._lines.append(raw.decode(errors="replace").rstrip("\n"))
                    self._cond.notify_all()
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def text(self) -> str:
        with self._cond:
            return "".join(line + "\n" for line in self._lines)

    def wait_log(self, pattern: str, timeout: float = 20.0) -> str:
        """The first log line matching ``pattern`` (a regular expression), as the operator
        prints it; fails when the operator ends first or after ``timeout``."""
        regex = re.compile(pattern)

        def found() -> str | None:
            return next((ln for ln in self._lines if regex.search(ln)), None)

        with self._cond:
            self._cond.wait_for(lambda: found() is not None or self._ended, timeout)
            line = found()
        if line is None:
            self.assert_running()
            raise AssertionError(f"no log line matching {pattern!r} within {timeout} s")
        return line

    def close(self) -> None:
        """After the process ended: the rest of its output copied."""
        self._reader.join(timeout=10)

    def assert_running(self) -> None:
        assert self.process.poll() is None, f"the operator exited:\n{self.text()[-3000:]}"

    def assert_no_forbidden(self) -> None:
        """No request of the operator's was refused, but for writes into other namespaces: an
        all-namespaces operator also sees namespaces other tests deleted, which stay
        Terminating here (no namespace controller), where the server refuses new objects
        with 403 whatever the RBAC."""
        # key=value logs, the value quoted or not; or the server's own words in an error
        # ("... in namespace k8slease-test-x because it is being terminated")
        other = re.compile(
            r"(?:namespace='?|in namespace )(?!" + re.escape(self.namespace) + r"(?:'|\s|$))[^'\s]+"
        )
        refused = [
            ln for ln in self.text().splitlines() if REFUSED.search(ln) and not other.search(ln)
        ]
        assert not refused, "\n".join(refused[:10])

    def wait_status(
        self, admin: Any, name: str, predicate: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        api = kubernetes.client.CustomObjectsApi(admin)

        def probe() -> dict[str, Any] | None:
            self.assert_running()
            try:
                obj = api.get_namespaced_custom_object(
                    CRD_GROUP, CRD_VERSION, self.namespace, CRD_PLURAL, name
                )
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise
            status = obj.get("status") or {}
            return status if predicate(status) else None

        def changes(seconds: int) -> Iterable[Any]:
            return watch.Watch().stream(
                api.list_namespaced_custom_object, CRD_GROUP, CRD_VERSION, self.namespace,
                CRD_PLURAL, field_selector=f"metadata.name={name}", timeout_seconds=seconds,
            )  # fmt: skip

        found: dict[str, Any] = wait_changes(f"the status of {name}", probe, changes, 20.0)
        return found

    def wait_event(self, admin: Any, name: str, reason: str) -> Any:
        core = kubernetes.client.CoreV1Api(admin)
        selector = f"involvedObject.name={name},reason={reason}"

        def probe() -> list[Any]:
            self.assert_running()
            return list(core.list_namespaced_event(self.namespace, field_selector=selector).items)

        def changes(seconds: int) -> Iterable[Any]:
            return watch.Watch().stream(
                core.list_namespaced_event, self.namespace, field_selector=selector,
                timeout_seconds=seconds,
            )  # fmt: skip

        return wait_changes(f"a {reason} event about {name}", probe, changes, 20.0)


@contextmanager
def operator_run(
    kubeconfig: Path, namespace: str, log: Path, *, all_namespaces: bool = False
) -> Iterator[OperatorRun]:
    """The operator watching ``namespace`` (or, with ``all_namespaces``, every namespace; the
    tests then look at ``namespace``) as ``kubeconfig``'s identity; stopped afterwards."""
    process = start_operator(
        kubeconfig,
        *(["--all-namespaces"] if all_namespaces else ["--namespace", namespace]),
        # the tests' groups are auto-created (the RBAC tests need the create): declared
        "--auto-create-group",
        f"{namespace}/*",
        stdout=subprocess.PIPE,
    )
    run = OperatorRun(process, log, namespace)
    try:
        yield run
    finally:
        stop_process(process)
        run.close()
