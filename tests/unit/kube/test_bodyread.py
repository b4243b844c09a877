"""An answer's body is read up to a bound (one object's, a list's), not whole whatever its size:
one larger than it announced is not read at all, one sent without a length is read until it
passes the bound; either way the connection is closed and the request is ``Unavailable`` naming
the bound. Read through urllib3's own response over a body that counts what was read."""

from __future__ import annotations

import gzip
import io
import json

import pytest
import urllib3

from k8slease.kube.bodyread import (
    MAX_LIST_BYTES,
    MAX_OBJECT_BYTES,
    TooLarge,
    read_at_most,
    too_large,
)


class Body(io.RawIOBase):
    """``size`` bytes of ``fill`` made as they are read (``None``: never ending); counts them."""

    def __init__(self, size: int | None, fill: bytes = b" ") -> None:
        self.size, self.fill, self.served = size, fill, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        left = len(buffer) if self.size is None else min(len(buffer), self.size - self.served)
        buffer[:left] = (self.fill * (left // len(self.fill) + 1))[:left]
        self.served += left
        return left


def _response(body: io.RawIOBase, **headers: str) -> urllib3.HTTPResponse:
    return urllib3.HTTPResponse(
        body=io.BufferedReader(body), headers=headers, status=200, preload_content=False
    )


def test_a_body_within_the_bound_is_read_whole() -> None:
    lease = json.dumps({"metadata": {"name": "demo", "resourceVersion": "1"}}).encode()
    assert read_at_most(_response(io.BytesIO(lease)), MAX_OBJECT_BYTES) == lease
    exact = Body(MAX_OBJECT_BYTES)
    announced = {"Content-Length": str(MAX_OBJECT_BYTES)}
    read = read_at_most(_response(exact, **announced), MAX_OBJECT_BYTES)
    assert len(read) == MAX_OBJECT_BYTES


def test_a_body_announced_larger_than_the_bound_is_not_read() -> None:
    body = Body(10 * MAX_OBJECT_BYTES)
    response = _response(body, **{"Content-Length": str(10 * MAX_OBJECT_BYTES)})
    with pytest.raises(TooLarge) as caught:
        read_at_most(response, MAX_OBJECT_BYTES)
    assert (caught.value.limit, caught.value.announced) == (MAX_OBJECT_BYTES, 10 * MAX_OBJECT_BYTES)
    assert body.served == 0
    assert response.closed


@pytest.mark.parametrize("limit", [MAX_OBJECT_BYTES, MAX_LIST_BYTES], ids=["object", "list"])
def test_an_endless_body_is_read_only_past_the_bound(limit: int) -> None:
    """Before: the whole body was read into memory (an endless one, until memory ran out)."""
    body = Body(None)
    response = _response(body)
    with pytest.raises(TooLarge) as caught:
        read_at_most(response, limit)
    assert (caught.value.limit, caught.value.announced) == (limit, None)
    assert limit < body.served <= limit + 128 * 1024  # a chunk, and the reader's buffer
    assert response.closed


def test_a_compressed_body_is_bounded_by_what_it_decodes_to() -> None:
    """A body of 100 MiB of spaces gzipped into 100 KiB: bounded by its 100 MiB."""
    packed = gzip.compress(b" " * (100 * 1024 * 1024))
    response = _response(io.BytesIO(packed), **{"Content-Encoding": "gzip"})
    with pytest.raises(TooLarge):
        read_at_most(response, MAX_OBJECT_BYTES)


def test_the_error_names_the_bound_and_what_was_read() -> None:
    announced = too_large("get", TooLarge(MAX_OBJECT_BYTES, 5_000_000), what="one Lease")
    assert str(announced) == (
        "get: the API server answered 5000000 bytes, more than the 4 MiB k8slease reads for "
        "one Lease; not read"
    )
    streamed = too_large("list", TooLarge(MAX_LIST_BYTES, None), what="a LeaseList")
    assert str(streamed) == (
        "list: the API server answered more than the 64 MiB k8slease reads for a LeaseList; "
        "the rest was not read"
    )
