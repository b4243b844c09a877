"""A Lease watch stream that ends under its reader ends as ``Unavailable``, whatever the
socket layer raised: a reader (the elector's watch thread, the informer) must see the end that
``close_watches`` promises, not an exception it counts as its own crash."""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator
from typing import cast

import pytest
import urllib3

from k8slease.errors import Unavailable
from k8slease.kube.bodyread import MAX_OBJECT_BYTES
from k8slease.lease.transport import WatchEvent, _watch_lines

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
    events = cast(Generator[WatchEvent], _watch_lines(Stream([EVENT + b"\n"], None)))
    next(events)
    with pytest.raises(KeyError):
        events.throw(KeyError("the consumer's bug"))


def _line(event: object) -> bytes:
    return json.dumps(event).encode() + b"\n"


SENT = "watch: the API server sent an event of type "

#: watch lines that are not an event the API server sends, and what the error names
NOT_AN_EVENT = {
    "deep-array": (b"[" * 100_000 + b"\n", "watch: the API server sent a line that is not JSON"),
    "deep-object": (
        b'{"type": "ADDED", "object": ' * 100_000 + b"\n",
        "watch: the API server sent a line that is not JSON",
    ),
    "metadata-a-string": (
        _line({"type": "MODIFIED", "object": {"kind": "Lease", "metadata": "x", "spec": {}}}),
        SENT + "'MODIFIED' with a Lease whose metadata is 'x', not a mapping",
    ),
    "no-resource-version": (
        _line({"type": "ADDED", "object": {"metadata": {"name": "g"}}}),
        SENT + "'ADDED' with a Lease without metadata.resourceVersion",
    ),
    "deleted-without-name": (
        _line({"type": "DELETED", "object": {"metadata": {"resourceVersion": "8"}}}),
        SENT + "'DELETED' with a Lease without metadata.name",
    ),
    "another-kind": (
        _line({"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "g"}}}),
        SENT + "'ADDED' with an object whose kind is 'Pod', not Lease",
    ),
    "bookmark-without-resource-version": (
        _line({"type": "BOOKMARK", "object": {"kind": "Lease", "metadata": {}}}),
        SENT + "'BOOKMARK' with a Lease without metadata.resourceVersion",
    ),
}


@pytest.mark.parametrize(("line", "problem"), NOT_AN_EVENT.values(), ids=NOT_AN_EVENT.keys())
def test_a_line_that_is_not_an_event_ends_the_stream_as_unavailable(
    line: bytes, problem: str
) -> None:
    events = _watch_lines(Stream([EVENT + b"\n", line, EVENT + b"\n"], None))
    assert next(events).type == "MODIFIED"
    with pytest.raises(Unavailable) as caught:
        next(events)
    assert str(caught.value) == problem


def test_a_bookmark_needs_only_its_resource_version() -> None:
    bookmark = {
        "type": "BOOKMARK",
        "object": {
            "kind": "Lease",
            "apiVersion": "coordination.k8s.io/v1",
            "metadata": {
                "resourceVersion": "9",
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }
    (event,) = _watch_lines(Stream([_line(bookmark)], None))
    assert (event.type, event.lease["metadata"]["resourceVersion"]) == ("BOOKMARK", "9")


def test_a_line_of_many_chunks_costs_time_in_proportion_to_its_size() -> None:
    # almost the 4 MiB a line may have, in 1 KiB chunks: joined once (milliseconds), not
    # re-copied and re-scanned for its end at every chunk (16 MiB in 4 KiB chunks took about
    # 15 s before; this, 8 GB of copies)
    chunk = b" " * 1024
    chunks = [EVENT[:1], *([chunk] * (MAX_OBJECT_BYTES // 1024 - 1)), EVENT[1:] + b"\n"]
    started = time.monotonic()
    (event,) = _watch_lines(Stream(chunks, None))
    assert time.monotonic() - started < 2.0
    assert event.lease["metadata"]["resourceVersion"] == "7"


class Endless:
    """A stream of one line of 64 MiB of spaces in 4 KiB chunks (endless, as far as the reader
    should see: it stops when closed); counts what was read."""

    def __init__(self) -> None:
        self.read = 0
        self.closed = self.released = False

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        while not self.closed and self.read < 16 * MAX_OBJECT_BYTES:
            self.read += 4096
            yield b" " * 4096

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        self.released = True


def test_a_line_longer_than_one_object_ends_the_stream_unread() -> None:
    """Before: the line's chunks were kept until it ended, so a server that never ended it was
    held in memory whole."""
    stream = Endless()
    with pytest.raises(Unavailable) as caught:
        next(_watch_lines(stream))
    assert str(caught.value) == (
        "watch: the API server sent a line longer than the 4 MiB k8slease reads for one event;"
        " the rest was not read"
    )
    assert MAX_OBJECT_BYTES < stream.read <= MAX_OBJECT_BYTES + 4096
    assert stream.closed and stream.released  # the connection is not reused half read


def _event(kind: str, name: str, namespace: str | None) -> bytes:
    metadata = {"name": name, "resourceVersion": "8"}
    if namespace is not None:
        metadata["namespace"] = namespace
    return _line({"type": kind, "object": {"kind": "Lease", "metadata": metadata}})


#: events of another object than the watch asked for: (the watch's name, the line, the error)
ANOTHER_OBJECT = {
    "another-namespace": (
        None,
        _event("ADDED", "g", "kube-system"),
        SENT + "'ADDED' with a Lease in namespace 'kube-system', not 'default'",
    ),
    "another-name": (
        "g",
        _event("MODIFIED", "h", "default"),
        SENT + "'MODIFIED' with the Lease 'default/h' instead of 'default/g'",
    ),
    "another-name-deleted": (
        "g",
        _event("DELETED", "h", None),
        SENT + "'DELETED' with the Lease 'h' instead of 'default/g'",
    ),
    "named-in-another-namespace": (
        "g",
        _event("MODIFIED", "g", "other"),
        SENT + "'MODIFIED' with the Lease 'other/g' instead of 'default/g'",
    ),
}


@pytest.mark.parametrize(
    ("name", "line", "problem"), ANOTHER_OBJECT.values(), ids=ANOTHER_OBJECT.keys()
)
def test_an_event_of_another_object_ends_the_stream_as_unavailable(
    name: str | None, line: bytes, problem: str
) -> None:
    """Before: taken as an event of the Lease watched (the elector's record of its Lease)."""
    events = _watch_lines(Stream([EVENT + b"\n", line], None), namespace="default", name=name)
    assert next(events).type == "MODIFIED"
    with pytest.raises(Unavailable) as caught:
        next(events)
    assert str(caught.value) == problem


def test_events_of_the_objects_watched_pass() -> None:
    lines = [
        _event("ADDED", "g", "default"),
        _event("MODIFIED", "h", "default"),
        _event("DELETED", "g", None),  # a server that leaves the namespace out
    ]
    seen = _watch_lines(Stream(lines, None), namespace="default")
    assert [e.lease["metadata"]["name"] for e in seen] == ["g", "h", "g"]
