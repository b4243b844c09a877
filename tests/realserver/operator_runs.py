"""``python -m k8slease operator`` as a subprocess with a given kubeconfig (an account's token),
and what the tests wait for: a log line, a status field, an Event."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException

from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION

REPO = Path(__file__).resolve().parents[2]
FAST_ENV = {
    "K8SLEASE_OPERATOR_FLUSH_INTERVAL": "0.05",
    "K8SLEASE_OPERATOR_MIN_WRITE_INTERVAL": "0.1",
    "K8SLEASE_OPERATOR_EVALUATE_INTERVAL": "0.5",
}
#: How an operator log shows a request the API server refused.
REFUSED = re.compile(r"403|[Ff]orbidden")


def poll(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``probe()`` every 50 ms until it is truthy (the operator is another process: there is no
    event to wait on here); fails with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


class OperatorRun:
    """One operator process and its log."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path, namespace: str) -> None:
        self.process = process
        self.log = log
        self.namespace = namespace

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, pattern: str, timeout: float = 20.0) -> str:
        """The first log line matching ``pattern`` (a regular expression)."""
        regex = re.compile(pattern)

        def probe() -> str | None:
            self.assert_running()
            return next((ln for ln in self.text().splitlines() if regex.search(ln)), None)

        line: str = poll(f"a log line matching {pattern!r}", probe, timeout)
        return line

    def assert_running(self) -> None:
        assert self.process.poll() is None, f"the operator exited:\n{self.text()[-3000:]}"

    def assert_no_forbidden(self) -> None:
        """No request of the operator's was refused, but for writes into other namespaces: an
        all-namespaces operator also sees namespaces other tests deleted, which stay
        Terminating here (no namespace controller), where the server refuses new objects
        with 403 whatever the RBAC."""
        # key=value logs, the value quoted or not
        other = re.compile(r"namespace='?(?!" + re.escape(self.namespace) + r"(?:'|\s|$))[^'\s]+")
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

        found: dict[str, Any] = poll(f"the status of {name}", probe)
        return found

    def wait_event(self, admin: Any, name: str, reason: str) -> Any:
        core = kubernetes.client.CoreV1Api(admin)

        def probe() -> list[Any]:
            self.assert_running()
            events = core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={name},reason={reason}"
            )
            return list(events.items)

        return poll(f"a {reason} event about {name}", probe)


@contextmanager
def operator_run(
    kubeconfig: Path, namespace: str, log: Path, *, all_namespaces: bool = False
) -> Iterator[OperatorRun]:
    """The operator watching ``namespace`` (or, with ``all_namespaces``, every namespace; the
    tests then look at ``namespace``) as ``kubeconfig``'s identity; stopped afterwards."""
    env = dict(os.environ, **FAST_ENV)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "k8slease",
                "operator",
                "--kubeconfig",
                str(kubeconfig),
                *(["--all-namespaces"] if all_namespaces else ["--namespace", namespace]),
                # the tests' groups are auto-created (the RBAC tests need the create): declared
                "--auto-create-group",
                f"{namespace}/*",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            yield OperatorRun(process, log, namespace)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
