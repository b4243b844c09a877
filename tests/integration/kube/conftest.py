"""The proxy in front of an embedded API server that the garbage-answer tests answer through."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from k8slease.testing.server import APIServer
from tests.support.garbage_proxy import GarbageProxy


@pytest.fixture
def proxy() -> Iterator[GarbageProxy]:
    """A :class:`GarbageProxy` (forwarding everything until a test sets its rule) in front of a
    plain-HTTP embedded server without auth, closed after the test."""
    with APIServer(tls=False, auth=False) as server:
        garbage = GarbageProxy(server.url)
        try:
            yield garbage
        finally:
            garbage.close()
