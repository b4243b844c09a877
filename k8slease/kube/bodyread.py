"""Reading an answer's body with a bound on its size, so that a hostile or broken API server (or
whatever stands in front of it) that sends an endless body cannot make a replica hold it all.

Leases are small: a k8slease job Lease, with its run record and counts, is about 1.5 KiB (on the
embedded server; a real one adds ``managedFields``). The API server cannot store much more than
a Lease should hold: etcd refuses a value above 1.5 MiB (its default ``--max-request-bytes``)
and the API server a write body above 3 MiB. So :data:`MAX_OBJECT_BYTES` (4 MiB) is above any
Lease a server with default limits can answer, and a replica reads at most that for one object:
a GET, a create's or an update's answer, a delete's Status, an error answer's body, one watch
event. A list (read whole: the transport does not page) holds every job Lease of a ``Jobs``
group: :data:`MAX_LIST_BYTES` (64 MiB) is more than 8,000 job Leases of 8 KiB, far more than a
group has.

An answer that announces a larger ``Content-Length`` is not read at all; one sent without a
length (chunked) is read until it passes the bound. Either way its connection is closed (never
handed back to the pool with the rest of the body unread) and the request fails as
``Unavailable`` naming the bound.
"""

from __future__ import annotations

import contextlib
from typing import Any

import urllib3

from k8slease.errors import Unavailable

#: The most bytes read of one object's answer (a Lease, a Status, an Event, an error body,
#: one watch event's line).
MAX_OBJECT_BYTES = 4 * 1024 * 1024
#: The most bytes read of a list's answer (the Leases of a ``Jobs`` group).
MAX_LIST_BYTES = 64 * 1024 * 1024
#: How much is read at a time.
_CHUNK = 64 * 1024


class TooLarge(Exception):
    """The body passed ``limit`` bytes (``announced``: the length it said it had, if any)."""

    def __init__(self, limit: int, announced: int | None) -> None:
        super().__init__(limit, announced)
        self.limit, self.announced = limit, announced


def mib(size: int) -> str:
    """``size`` bytes in MiB, as the limits are written: ``4 MiB``."""
    return f"{size / (1024 * 1024):g} MiB"


def too_large(verb: str, error: TooLarge, *, what: str) -> Unavailable:
    """The ``Unavailable`` of an answer over its bound, ``what`` naming what it should be."""
    bound = f"the {mib(error.limit)} k8slease reads for {what}"
    if error.announced is not None:
        return Unavailable(
            f"{verb}: the API server answered {error.announced} bytes, more than {bound}; not read"
        )
    return Unavailable(f"{verb}: the API server answered more than {bound}; the rest was not read")


def read_at_most(response: Any, limit: int) -> bytes:
    """The body of ``response`` (a urllib3 response not read yet), decoded as urllib3 decodes
    it; :class:`TooLarge` once it passes ``limit`` bytes, the connection closed. urllib3's and
    the socket's errors propagate (the connection is released by urllib3)."""
    announced = _content_length(response)
    if announced is not None and announced > limit:
        abandon(response)
        raise TooLarge(limit, announced)
    chunks: list[bytes] = []
    total = 0
    for chunk in response.stream(_CHUNK, decode_content=True):
        total += len(chunk)
        if total > limit:
            abandon(response)
            raise TooLarge(limit, None)
        chunks.append(chunk)
    return b"".join(chunks)


def _content_length(response: Any) -> int | None:
    """The ``Content-Length`` the answer announced, or ``None`` (none, or not a number)."""
    value = response.headers.get("Content-Length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def abandon(response: Any) -> None:
    """Close ``response``'s connection, its body unread, and give its slot back to the pool
    (the pool opens a new connection in its place)."""
    # AttributeError/ValueError: urllib3 already let go of the socket
    with contextlib.suppress(urllib3.exceptions.HTTPError, OSError, AttributeError, ValueError):
        response.close()
    with contextlib.suppress(urllib3.exceptions.HTTPError, OSError, AttributeError, ValueError):
        response.release_conn()
