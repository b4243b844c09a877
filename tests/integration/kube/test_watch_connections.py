"""A watch left before its end must not hand a half-read connection to the next request.

A cold CI run saw a Lease release's read fail with ``BadStatusLine('48c\\r\\n')``: the size line
of a chunk, read where a status line was expected, as if a connection had gone back to the pool
with a response still streaming on it. The release gave up after that one failed read (it is now
retried within the renew deadline: tests/unit/election/test_machine_release.py). Where that
connection came from is not known; this test pins the property that rules out the likeliest
source: a watch stream its reader leaves early (an elector or informer stopping, a watch
restarted) is closed, not pooled, while the server still writes events on it.
"""

from __future__ import annotations

import threading
from typing import Any

from k8slease.lease.transport import LeaseTransport


def lease_body(name: str, holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 10},
    }


def test_requests_after_a_watch_left_early_read_their_own_answers(k8s_apiserver: Any) -> None:
    # one connection in the pool, so the next request gets the watch's connection if it was
    # put back
    api_client = k8s_apiserver.api_client()
    api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] = 1
    transport = LeaseTransport(api_client, "default", request_timeout=5.0)
    other = LeaseTransport(k8s_apiserver.api_client(), "default", request_timeout=5.0)
    name = f"watch-left-{threading.get_ident() % 100000}"
    lease = other.create(lease_body(name, "a"))
    stream = transport.watch(name=name, resource_version=lease["metadata"]["resourceVersion"])
    lease = other.replace(name, {**lease, "spec": {**lease["spec"], "holderIdentity": "b"}})
    first = next(stream)
    assert first.type == "MODIFIED"
    stream.close()  # the reader leaves while the server still has events to send
    # urllib3 drops a pooled connection that has bytes waiting when it hands it out, but bytes
    # that arrive just after that check are read as the next answer's status line: so no
    # connection may go back to the pool with its stream unfinished
    pooled = [
        conn
        for pool in api_client.rest_client.pool_manager.pools._container.values()
        for conn in list(pool.pool.queue)
        if conn is not None
    ]
    assert all(conn.sock is None for conn in pooled), "a half-read watch connection was pooled"
    for holder in ("c", "d", "e"):
        # the server writes these events on the watch's connection, whether anyone reads it
        lease = other.replace(name, {**lease, "spec": {**lease["spec"], "holderIdentity": holder}})
    for _ in range(3):
        assert transport.get(name)["spec"]["holderIdentity"] == "e"
    api_client.close()
