"""What the Lease transport takes from a 2xx answer, through a proxy in front of the embedded
server (tests/support/garbage_proxy.py) that answers chosen requests itself:

- a body streamed without a length is read only up to its bound (one Lease: 4 MiB, a list:
  64 MiB), then its connection is closed and the request is ``Unavailable`` naming the bound;
  the next request works (the half-read connection was not handed back to the pool);
- an answer that is another Lease than the one asked for (a GET, a PUT, a named watch's event)
  or a list item in another namespace is ``Unavailable`` naming both.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from k8slease.errors import NotFound, Unavailable
from k8slease.kube.bodyread import MAX_LIST_BYTES, MAX_OBJECT_BYTES
from k8slease.lease.transport import LeaseTransport
from tests.support.garbage_proxy import GarbageProxy

#: what a long answer sends, 64 KiB at a time
CHUNK = b" " * 65536


@pytest.fixture
def transport(proxy: GarbageProxy) -> Iterator[LeaseTransport]:
    api = proxy.api_client()
    try:
        yield LeaseTransport(api, "default", request_timeout=30)
    finally:
        api.close()


def _answer(proxy: GarbageProxy, method: str, body: Any, *, watch: bool = False) -> None:
    """Answer ``method`` on Leases with ``body`` (``watch``: the watches, else the rest)."""

    def rule(asked: str, path: str) -> tuple[int, Any] | None:
        if asked != method or ("watch=true" in path) != watch or "/leases" not in path:
            return None
        return 200, body

    proxy.rule = rule


def _streamed(size: int) -> Iterator[bytes]:
    """``size`` bytes of spaces (not JSON), chunked: no length announced."""
    return itertools.repeat(CHUNK, size // len(CHUNK))


def test_a_long_get_is_read_up_to_one_lease_and_the_next_request_works(
    proxy: GarbageProxy, transport: LeaseTransport
) -> None:
    """Before: 64 MiB read into memory, then found not to be JSON (a body that never ends:
    read until the request's timeout)."""
    _answer(proxy, "GET", _streamed(64 * 1024 * 1024))
    with pytest.raises(Unavailable) as caught:
        transport.get("demo")
    assert str(caught.value) == (
        "get: the API server answered more than the 4 MiB k8slease reads for one Lease; the rest "
        "was not read"
    )
    assert proxy.wait_answered(1, 10)  # the proxy's write failed: the client had closed
    assert proxy.streamed < 4 * MAX_OBJECT_BYTES  # the bound and the sockets' buffers
    proxy.rule = lambda method, path: None
    with pytest.raises(NotFound):
        transport.get("demo")


def test_a_long_list_is_read_up_to_its_bound(
    proxy: GarbageProxy, transport: LeaseTransport
) -> None:
    _answer(proxy, "GET", _streamed(2 * MAX_LIST_BYTES))
    with pytest.raises(Unavailable) as caught:
        transport.list(label_selector="k8slease.io/group=billing")
    assert str(caught.value) == (
        "list: the API server answered more than the 64 MiB k8slease reads for a LeaseList; "
        "the rest was not read"
    )
    assert proxy.wait_answered(1, 10)
    assert proxy.streamed < MAX_LIST_BYTES + 3 * MAX_OBJECT_BYTES


def test_a_list_within_its_bound_is_read(proxy: GarbageProxy, transport: LeaseTransport) -> None:
    """A list larger than the bound of one Lease is no error: lists have their own."""
    item = _lease("demo", annotations={"big": "x" * 200_000})
    items = [{**item, "metadata": {**item["metadata"], "name": f"j{i}"}} for i in range(30)]
    body = {"kind": "LeaseList", "metadata": {"resourceVersion": "9"}, "items": items}
    _answer(proxy, "GET", json.dumps(body).encode())
    listed, version = transport.list()
    assert (len(listed), version) == (30, "9")


def _lease(name: str, namespace: str = "default", **metadata: Any) -> dict[str, Any]:
    return {
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7", **metadata},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }


def test_another_lease_answered_to_a_get_or_an_update_is_unavailable(
    proxy: GarbageProxy, transport: LeaseTransport
) -> None:
    """Before: returned as the Lease asked for."""
    _answer(proxy, "GET", json.dumps(_lease("other")).encode())
    with pytest.raises(Unavailable) as caught:
        transport.get("demo")
    assert str(caught.value) == (
        "get: the API server answered the Lease 'default/other' instead of 'default/demo'"
    )
    _answer(proxy, "PUT", json.dumps(_lease("demo", "kube-system")).encode())
    with pytest.raises(Unavailable) as caught:
        transport.replace("demo", _lease("demo"))
    assert str(caught.value) == (
        "update: the API server answered the Lease 'kube-system/demo' instead of 'default/demo'"
    )


def test_a_list_item_in_another_namespace_is_unavailable(
    proxy: GarbageProxy, transport: LeaseTransport
) -> None:
    items = [_lease("a"), _lease("b", "kube-system")]
    body = {"kind": "LeaseList", "metadata": {"resourceVersion": "9"}, "items": items}
    _answer(proxy, "GET", json.dumps(body).encode())
    with pytest.raises(Unavailable) as caught:
        transport.list()
    assert str(caught.value) == (
        "list: the API server answered a LeaseList whose item 1 is a Lease in namespace "
        "'kube-system', not 'default'"
    )


def test_a_named_watch_sent_another_leases_event_is_unavailable(
    proxy: GarbageProxy, transport: LeaseTransport
) -> None:
    events = [{"type": "MODIFIED", "object": _lease(name)} for name in ("demo", "other")]
    _answer(proxy, "GET", b"".join(json.dumps(e).encode() + b"\n" for e in events), watch=True)
    seen = transport.watch(name="demo", resource_version="1", timeout_seconds=5)
    assert next(seen).lease["metadata"]["name"] == "demo"
    with pytest.raises(Unavailable) as caught:
        next(seen)
    assert str(caught.value) == (
        "watch: the API server sent an event of type 'MODIFIED' with the Lease 'default/other' "
        "instead of 'default/demo'"
    )
