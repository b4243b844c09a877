"""A Lease watch stream that ends under its reader ends as ``Unavailable``, whatever the
socket layer raised: a reader (the elector's watch thread, the informer) must see the end that
``close_watches`` promises, not an exception it counts as its own crash."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import urllib3

from k8slease.errors import Unavailable
from k8slease.lease.transport import _watch_lines

EVENT = json.dumps(
    {"type": "MODIFIED", "object": {"metadata": {"name": "g", "resourceVersion": "7"}}}
).encode()


class Stream:
    """A response whose stream yields ``chunks``, then raises ``error`` (None: ends)."""

    def __init__(self, chunks: list[bytes], error: BaseException | None) -> None:
        self.chunks, self.error = chunks, error

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize(
    "error",
    [
        ValueError("Read on closed or unwrapped SSL socket."),  # ssl, after close_watches
        AttributeError("'NoneType' object has no attribute 'readline'"),  # urllib3 let go
        urllib3.exceptions.ProtocolError("Connection broken"),
        OSError(9, "Bad file descriptor"),
    ],
    ids=["ssl-closed", "released", "protocol", "oserror"],
)
def test_a_stream_that_breaks_under_its_reader_ends_as_unavailable(error: Exception) -> None:
    events = _watch_lines(Stream([EVENT + b"\n"], error))
    first = next(events)
    assert (first.type, first.lease["metadata"]["resourceVersion"]) == ("MODIFIED", "7")
    with pytest.raises(Unavailable, match=type(error).__name__):
        next(events)


def test_a_stream_that_ends_yields_its_last_line_and_stops() -> None:
    assert [e.type for e in _watch_lines(Stream([EVENT[:10], EVENT[10:]], None))] == ["MODIFIED"]


def test_an_error_of_the_readers_own_code_is_not_taken_for_a_broken_stream() -> None:
    events = _watch_lines(Stream([EVENT + b"\n"], None))
    next(events)
    with pytest.raises(KeyError):
        events.throw(KeyError("the consumer's bug"))
