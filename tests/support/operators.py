"""The operator under test: the one launcher of ``python -m k8slease operator`` (used by the
integration tests and, with an account's kubeconfig, by the real-server RBAC and admission tests),
and the waits for what it writes (a group's status, its Events), decided by watches of what the
probe reads."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION
from k8slease.operator.crd import install_crd
from k8slease.testing.server import APIServer
from tests.support.processes import REPO, child_env

__all__ = ["REPO"]  # re-exported: some tests run the operator from the repository root

#: Fast pacing for tests: write within ~0.1 s, evaluate time-based conditions twice a second.
FAST_ENV = {
    "K8SLEASE_OPERATOR_FLUSH_INTERVAL": "0.05",
    "K8SLEASE_OPERATOR_MIN_WRITE_INTERVAL": "0.1",
    "K8SLEASE_OPERATOR_EVALUATE_INTERVAL": "0.5",
}


@contextmanager
def server_with_crd(namespace: str) -> Iterator[APIServer]:
    """An embedded API server of its own, with the ScheduledJobGroup CRD installed and
    ``namespace`` created."""
    with APIServer() as srv:
        api = srv.api_client()
        install_crd(api)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        api.close()
        yield srv


def server_fixture(namespace: str) -> Any:
    """A pytest fixture ``server``: :func:`server_with_crd` for ``namespace``, per test."""

    @pytest.fixture
    def server() -> Iterator[APIServer]:
        with server_with_crd(namespace) as srv:
            yield srv

    return server


def shared_server_fixture(namespace: str) -> Any:
    """A module-scoped pytest fixture ``server``: the session's ``k8s_apiserver`` (embedded, then
    the real control plane) with the ScheduledJobGroup CRD installed and ``namespace`` created."""

    @pytest.fixture(scope="module")
    def server(k8s_apiserver: APIServer) -> Iterator[APIServer]:
        api = k8s_apiserver.api_client()
        install_crd(api)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        api.close()
        yield k8s_apiserver

    return server


@contextmanager
def operator_process(
    kubeconfig: Path, namespace: str | None, *args: str, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m k8slease operator`` against ``kubeconfig``, stopped (SIGTERM) afterwards.

    ``namespace=None`` runs it with ``--all-namespaces``. Every group is declared for
    auto-creation (``--auto-create-group *``) unless ``args`` declare some: these tests' groups
    are auto-created; the opt-in rule itself is tested in tests/unit/operator.
    """
    scope = ["--namespace", namespace] if namespace is not None else ["--all-namespaces"]
    if "--auto-create-group" not in args:
        scope += ["--auto-create-group", "*"]
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = start_operator(kubeconfig, *scope, *args, stdout=out)
    try:
        yield proc
    finally:
        stop_process(proc)
        if out is not subprocess.DEVNULL:
            out.close()


def start_operator(kubeconfig: Path, *args: str, stdout: Any) -> subprocess.Popen[bytes]:
    """``python -m k8slease operator --kubeconfig KUBECONFIG ARGS`` from the repository root,
    paced by :data:`FAST_ENV`, its output (stderr too) to ``stdout``."""
    return subprocess.Popen(
        [sys.executable, "-m", "k8slease", "operator", "--kubeconfig", str(kubeconfig), *args],
        cwd=REPO,
        env=child_env(**FAST_ENV),
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM ``proc`` and wait; SIGKILL it if it has not ended within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def get_group(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


#: Opens a watch that ends after the given number of seconds; yields one item per change.
Changes = Callable[[int], Iterable[Any]]


def event_changes(api: client.ApiClient, namespace: str) -> Changes:
    """The namespace's Events, as a watch."""
    events = client.CoreV1Api(api)
    return lambda seconds: watch.Watch().stream(
        events.list_namespaced_event, namespace, timeout_seconds=seconds
    )


def group_changes(api: client.ApiClient, namespace: str, name: str) -> Changes:
    """One ScheduledJobGroup, as a watch."""
    groups = client.CustomObjectsApi(api)
    return lambda seconds: watch.Watch().stream(
        groups.list_namespaced_custom_object, CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL,
        field_selector=f"metadata.name={name}", timeout_seconds=seconds,
    )  # fmt: skip


def wait_for(
    what: str,
    probe: Callable[[], Any],
    *,
    changes: Changes,
    timeout: float = 15.0,
    window: int | None = None,
) -> Any:
    """``probe()`` now and again after each change ``changes`` reports (a watch of what the probe
    reads) until it returns something truthy; fail with ``what`` after ``timeout``.

    A watch opened without a resourceVersion starts with every existing object, so a change made
    between the probe and the watch's start is not missed. Each watch stays open ``window``
    seconds (default: the time left), then the probe asks again: a probe that also checks that
    the operator still runs so notices its exit within ``window``.
    """
    deadline = time.monotonic() + timeout
    last = probe()
    while not last:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")
        for _ in changes(window or math.ceil(left)):
            last = probe()
            if last:
                break
        else:
            last = probe()  # the window ended: asks again
    return last


def wait_status(
    api: client.ApiClient,
    namespace: str,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    what: str,
    *,
    timeout: float = 15.0,
) -> dict[str, Any]:
    """Wait until the group's status satisfies ``predicate``; returns the status."""

    def probe() -> dict[str, Any] | None:
        obj = get_group(api, namespace, name)
        status = (obj or {}).get("status") or {}
        return status if status and predicate(status) else None

    result: dict[str, Any] = wait_for(
        what, probe, changes=group_changes(api, namespace, name), timeout=timeout
    )
    return result


def condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c.get("type") == ctype), {})


def wait_condition(
    api: client.ApiClient,
    namespace: str,
    name: str,
    ctype: str,
    *,
    status: str | None = None,
    reason: str | None = None,
    timeout: float = 15.0,
) -> dict[str, Any]:
    """Wait until the group's ``ctype`` condition has ``status`` and/or ``reason`` (each that is
    given); returns the group's status."""
    want = {k: v for k, v in (("status", status), ("reason", reason)) if v is not None}
    if not want:
        raise ValueError("wait_condition needs a status or a reason to wait for")

    def met(s: dict[str, Any]) -> bool:
        found = condition(s, ctype)
        return all(found.get(k) == v for k, v in want.items())

    what = f"{ctype}=" + "/".join(want.values())
    return wait_status(api, namespace, name, met, what, timeout=timeout)


def group_events(api: client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    events = client.CoreV1Api(api).list_namespaced_event(namespace)
    return [
        {"type": e.type, "reason": e.reason, "message": e.message}
        for e in events.items
        if e.involved_object.kind == "ScheduledJobGroup" and e.involved_object.name == name
    ]


def create_group(
    api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": "ScheduledJobGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec or {},
    }
    obj: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, body
    )
    return obj
