"""Behaviour specific to the embedded server: its counter, window, faults, stats and CLI.

These use ``k8s_embedded_apiserver`` (a fresh server per test, even when the suite runs
against a real cluster) because they observe things only the embedded server exposes.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from k8slease.testing import APIServer
from tests.support.processes import serving

MERGE = "application/merge-patch+json"


def lease(name: str, holder: str = "a") -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


@pytest.fixture
def coord(k8s_embedded_apiserver: APIServer) -> Any:
    api_client = k8s_embedded_apiserver.api_client()
    yield client.CoordinationV1Api(api_client)
    api_client.close()


def control(server: APIServer, method: str, what: str, body: Any = None) -> Any:
    """Call the ``/_k8slease/`` control API over HTTP, as another process would."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {**server.headers(), **({"Content-Type": "application/json"} if data else {})}
    request = urllib.request.Request(
        f"{server.url}/_k8slease/{what}", data=data, method=method, headers=headers
    )
    with urllib.request.urlopen(request, timeout=5, context=server.ssl_context()) as response:
        return json.loads(response.read())


def watch_in_background(
    coord: Any, each: Callable[[dict[str, Any]], Any]
) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    """Watch the Leases of "default" (``timeout_seconds=1``) in a daemon thread, each event to
    ``each``; returns the thread, an Event set when the stream ends (cleanly or broken) and
    the error that broke it, if one did."""
    ended = threading.Event()
    failed: list[BaseException] = []

    def consume() -> None:
        try:
            for event in watch.Watch().stream(
                coord.list_namespaced_lease, "default", timeout_seconds=1
            ):
                each(event)
        except Exception as exc:  # the broken stream
            failed.append(exc)
        ended.set()

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    return worker, ended, failed


def test_resource_version_moves_only_on_writes(
    k8s_embedded_apiserver: APIServer, coord: Any
) -> None:
    server = k8s_embedded_apiserver
    start = server.resource_version
    created = coord.create_namespaced_lease("default", lease("rv"))
    assert int(created.metadata.resource_version) == start + 1 == server.resource_version
    coord.read_namespaced_lease("rv", "default")
    coord.list_lease_for_all_namespaces()
    list(watch.Watch().stream(coord.list_namespaced_lease, "default", timeout_seconds=0))
    assert server.resource_version == start + 1
    same = coord.replace_namespaced_lease("rv", "default", created)  # a no-op update
    assert same.metadata.resource_version == created.metadata.resource_version
    assert server.resource_version == start + 1
    core = client.CoreV1Api(coord.api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="other")))
    moved = coord.patch_namespaced_lease(
        "rv", "default", {"spec": {"holderIdentity": "b"}}, _content_type=MERGE
    )
    assert int(moved.metadata.resource_version) == start + 3  # one counter across resources


def test_watch_window_expires(coord: Any) -> None:
    with APIServer(history_size=5) as server, server.api_client() as api_client:
        api = client.CoordinationV1Api(api_client)
        api.create_namespaced_lease("default", lease("w"))
        old = server.resource_version
        for holder in "bcdefgh":
            api.patch_namespaced_lease(
                "w", "default", {"spec": {"holderIdentity": holder}}, _content_type=MERGE
            )
        with pytest.raises(client.ApiException) as info:
            list(
                watch.Watch().stream(
                    api.list_namespaced_lease,
                    "default",
                    resource_version=str(old),
                    timeout_seconds=1,
                )
            )
        assert info.value.status == 410
        recent = str(server.resource_version - 2)
        w = watch.Watch()
        holders = []
        for event in w.stream(
            api.list_namespaced_lease, "default", resource_version=recent, timeout_seconds=5
        ):
            holders.append(event["object"].spec.holder_identity)
            if holders[-1] == "h":
                w.stop()
        assert holders == ["g", "h"]


def test_injected_errors_for_chosen_verbs(k8s_embedded_apiserver: APIServer, coord: Any) -> None:
    server = k8s_embedded_apiserver
    created = coord.create_namespaced_lease("default", lease("f"))
    server.faults.add("update", "leases", status=503, times=2)
    for _ in range(2):
        with pytest.raises(client.ApiException) as info:
            coord.replace_namespaced_lease("f", "default", created)
        body = json.loads(info.value.body)
        assert (info.value.status, body["reason"]) == (503, "ServiceUnavailable")
    coord.read_namespaced_lease("f", "default")  # other verbs are untouched
    coord.replace_namespaced_lease("f", "default", created)  # the rule is used up
    rule = server.faults.add(["get", "list"], "leases.coordination.k8s.io", status=429)
    with pytest.raises(client.ApiException) as info:
        coord.read_namespaced_lease("f", "default")
    assert json.loads(info.value.body)["reason"] == "TooManyRequests"
    server.faults.remove(rule)
    server.faults.add("get", "leases", status=429, retry_after=2, times=1)
    with pytest.raises(urllib.error.HTTPError) as http_error:
        urllib.request.urlopen(
            urllib.request.Request(
                f"{server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/f",
                headers=server.headers(),
            ),
            context=server.ssl_context(),
        )
    assert http_error.value.headers["Retry-After"] == "2"
    assert json.loads(http_error.value.read())["details"]["retryAfterSeconds"] == 2
    server.faults.add(resource="leases", name="other", status=500)
    coord.read_namespaced_lease("f", "default")
    server.faults.clear()
    assert server.faults.rules() == []


def test_injected_latency(k8s_embedded_apiserver: APIServer, coord: Any) -> None:
    k8s_embedded_apiserver.faults.add("list", latency=0.3)
    started = time.perf_counter()
    coord.list_namespaced_lease("default")
    assert time.perf_counter() - started >= 0.3


def test_pause_holds_requests_until_resumed(k8s_embedded_apiserver: APIServer, coord: Any) -> None:
    server = k8s_embedded_apiserver
    done = threading.Event()
    with server.faults.paused_requests():
        worker = threading.Thread(
            target=lambda: (coord.list_namespaced_lease("default"), done.set())
        )
        worker.start()
        assert not done.wait(0.3), "requests are held while paused"
        assert control(server, "GET", "stats")["total"] == 0  # the control API still answers
    assert done.wait(5)
    worker.join()


def test_dropped_watch_streams(k8s_embedded_apiserver: APIServer, coord: Any) -> None:
    server = k8s_embedded_apiserver
    coord.create_namespaced_lease("default", lease("d"))
    w = watch.Watch()
    events = []
    with pytest.raises(Exception) as info:
        for event in w.stream(coord.list_namespaced_lease, "default", timeout_seconds=30):
            events.append(event["type"])
            assert server.faults.drop_watches("leases") == 1
    assert events == ["ADDED"]
    assert "ApiException" not in type(info.value).__name__


def test_watch_dropped_after_a_delay_by_rule(k8s_embedded_apiserver: APIServer, coord: Any) -> None:
    k8s_embedded_apiserver.faults.add("watch", "leases", drop_after=0.2, times=1)
    started = time.perf_counter()
    with pytest.raises(Exception):  # noqa: B017
        list(watch.Watch().stream(coord.list_namespaced_lease, "default", timeout_seconds=10))
    assert time.perf_counter() - started < 5


def test_stalled_watch_streams_stay_open_and_say_nothing(
    k8s_embedded_apiserver: APIServer, coord: Any
) -> None:
    """A stalled watch (a half-open connection behind a dead load balancer) delivers nothing
    more, no bookmark, no end at its timeout, until it is broken; new watches stall by rule."""
    server = k8s_embedded_apiserver
    coord.create_namespaced_lease("default", lease("s1"))
    seen: list[str] = []
    first = threading.Event()
    worker, ended, failed = watch_in_background(
        coord, lambda event: (seen.append(event["object"].metadata.name), first.set())
    )
    assert first.wait(5), "the watch delivered the existing Lease"
    assert seen == ["s1"]
    assert server.faults.stall_watches("leases") == 1
    coord.create_namespaced_lease("default", lease("s2"))
    assert not ended.wait(1.5), "no event and no end past its 1 s timeout"
    assert seen == ["s1"]
    assert control(server, "POST", "drop-watches")["dropped"] == 1
    assert ended.wait(5) and failed, "broken, not ended cleanly"
    worker.join()
    server.faults.add("watch", "leases", stall_after=0.0, times=1)
    rest: list[str] = []
    _, gone, _ = watch_in_background(coord, lambda event: rest.append(event["type"]))
    assert not gone.wait(1.5) and rest == [], "stalled from the start: not even the list"
    assert server.faults.drop_watches("leases") == 1
    assert gone.wait(5)


def test_stats_count_requests_per_verb_and_resource(
    k8s_embedded_apiserver: APIServer, coord: Any
) -> None:
    server = k8s_embedded_apiserver
    server.stats.reset()
    coord.create_namespaced_lease("default", lease("s"))
    for _ in range(3):
        coord.read_namespaced_lease("s", "default")
    coord.list_namespaced_lease("default")
    assert server.stats.count("get", "leases") == 3
    assert server.stats.count("create") == 1
    assert server.stats.count(resource="leases.coordination.k8s.io") == 5
    assert server.stats.snapshot()["get leases.coordination.k8s.io"] == 3
    last = server.stats.requests()[-1]
    assert (last.verb, last.resource, last.namespace, last.code) == (
        "list",
        "leases.coordination.k8s.io",
        "default",
        200,
    )
    over_http = control(server, "GET", "stats")
    assert over_http["counts"]["get leases.coordination.k8s.io"] == 3 and over_http["total"] == 5
    control(server, "DELETE", "stats")
    assert server.stats.count() == 0


def test_stats_wait_until_wakes_on_each_recorded_request(
    k8s_embedded_apiserver: APIServer, coord: Any
) -> None:
    server = k8s_embedded_apiserver
    server.stats.reset()
    results: list[bool] = []
    waiter = threading.Thread(
        target=lambda: results.append(
            server.stats.wait_until(lambda: server.stats.count("get", "leases") >= 2, 30)
        )
    )
    waiter.start()
    coord.create_namespaced_lease("default", lease("w"))
    coord.read_namespaced_lease("w", "default")
    assert waiter.is_alive(), "one get is not two"
    coord.read_namespaced_lease("w", "default")
    waiter.join(timeout=5)  # woken by the second get's record, long before its 30 s
    assert results == [True]
    assert not server.stats.wait_until(lambda: server.stats.count("delete") > 0, 0.1)


def test_faults_over_http(k8s_embedded_apiserver: APIServer, coord: Any) -> None:
    server = k8s_embedded_apiserver
    rule = control(
        server, "POST", "faults", {"verbs": ["list"], "resource": "leases", "status": 500}
    )
    assert rule["status"] == 500 and rule["id"] > 0
    with pytest.raises(client.ApiException) as info:
        coord.list_namespaced_lease("default")
    assert json.loads(info.value.body)["reason"] == "InternalError"
    assert len(control(server, "GET", "faults")["faults"]) == 1
    control(server, "DELETE", "faults")
    coord.list_namespaced_lease("default")
    control(server, "POST", "pause")
    assert server.faults.paused
    control(server, "POST", "resume")
    assert not server.faults.paused
    assert control(server, "POST", "drop-watches?resource=leases") == {"dropped": 0}


def test_a_protobuf_body_is_an_unsupported_media_type(k8s_embedded_apiserver: APIServer) -> None:
    """client-go sends Leases as protobuf by default: it gets a 415 that names the way out, not a
    decoding error (a real server would accept protobuf; this one speaks JSON and YAML only)."""
    server = k8s_embedded_apiserver
    request = urllib.request.Request(
        f"{server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases",
        data=b"k8s\x00\n\x1c\n\x16coordination.k8s.io/v1\x12\x05Lease\x12\x98",
        headers={"Content-Type": "application/vnd.kubernetes.protobuf", **server.headers()},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5, context=server.ssl_context())
    body = json.loads(info.value.read())
    assert (info.value.code, body["reason"]) == (415, "UnsupportedMediaType")
    assert "application/json" in body["message"]


def test_restart_and_kubeconfig_cleanup() -> None:
    server = APIServer().start()
    first = server.kubeconfig
    assert first.exists()
    server.stop()
    assert not first.exists(), "a temporary kubeconfig is removed on stop"
    with server, server.api_client() as api_client:
        names = [n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items]
        assert "default" in names
        assert server.kubeconfig.exists()


def test_concurrent_conditional_updates_have_one_winner_per_version(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    with server.api_client() as setup:
        client.CoordinationV1Api(setup).create_namespaced_lease("default", lease("hot"))
    threads, rounds = 8, 15
    barrier = threading.Barrier(threads)
    wins: list[tuple[str, str]] = []
    conflicts = []
    lock = threading.Lock()

    def hammer(me: int) -> None:
        with server.api_client() as api_client:
            api = client.CoordinationV1Api(api_client)
            barrier.wait()
            for _ in range(rounds):
                current = api.read_namespaced_lease("hot", "default")
                based_on = current.metadata.resource_version
                current.spec.holder_identity = f"t{me}-{based_on}"
                try:
                    api.replace_namespaced_lease("hot", "default", current)
                except client.ApiException as exc:
                    assert exc.status == 409
                    with lock:
                        conflicts.append(based_on)
                else:
                    with lock:
                        wins.append((based_on, f"t{me}"))

    workers = [threading.Thread(target=hammer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    versions = [based_on for based_on, _ in wins]
    assert len(versions) == len(set(versions)), "two writers won from the same resourceVersion"
    assert len(wins) + len(conflicts) == threads * rounds
    with server.api_client() as check:
        final = client.CoordinationV1Api(check).read_namespaced_lease("hot", "default")
    first = int(final.metadata.resource_version) - len(wins)
    assert sorted(int(v) for v in versions) == list(range(first, first + len(wins)))


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with serving("k8slease", "apiserver", "--kubeconfig", str(kubeconfig), stop_within=10) as line:
        url = line.split()[1]
        assert url.startswith("https://127.0.0.1:") and kubeconfig.exists()
        document = json.loads(kubeconfig.read_text())
        cluster = document["clusters"][0]["cluster"]
        assert cluster["server"] == url
        token = document["users"][0]["user"]["token"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=ca)
        request = urllib.request.Request(
            f"{url}/api/v1/namespaces/default", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            assert json.loads(response.read())["metadata"]["name"] == "default"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/api/v1/namespaces/default", timeout=5, context=context)
        assert refused.value.code == 401
