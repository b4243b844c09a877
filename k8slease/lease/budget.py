"""How long the request being sent may take, decided by its caller from what is at stake.

A fixed per-request timeout is wrong both ways: short enough to keep a renew well inside the renew
deadline, it fails every request of an API server that is slow but answering; long enough for
that, it lets a hung request of a caller with nothing at stake stall it. So the caller says, for
the requests it sends in a block, how long their answer can still be used::

    with request_budget(time_left, connect=timing.timeout):
        transport.replace(name, body)

:class:`~k8slease.lease.transport.LeaseTransport` bounds each request sent inside the block by
the budget (the whole request: connect, send, wait, read) and its connect phase by ``connect``
(a connection that cannot even be opened in that time is dead, and the next attempt opens a new
one; a request that timed out drops its connection, so a hung connection is never reused).
Outside any block the transport's own ``request_timeout`` applies. The budget is per thread
(a context variable): the elector loop, a job's claim and a lock's keep-alive thread each set
their own.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: The shortest budget given to a request: below it an attempt cannot succeed anyway, and a
#: zero or negative timeout would mean "no timeout" or an error to urllib3.
MIN_BUDGET = 0.05


@dataclass(frozen=True, slots=True)
class Budget:
    """The bound of the whole request (``total``) and of opening its connection (``connect``)."""

    total: float
    connect: float


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "k8slease_request_budget", default=None
)


@contextmanager
def request_budget(total: float, *, connect: float | None = None) -> Iterator[Budget]:
    """Bound the requests this thread sends in the block by ``total`` seconds each (at least
    :data:`MIN_BUDGET`), their connect phase by ``connect`` (default: ``total``)."""
    whole = max(MIN_BUDGET, float(total))
    opening = whole if connect is None else max(MIN_BUDGET, min(float(connect), whole))
    budget = Budget(total=whole, connect=opening)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current_budget() -> Budget | None:
    """The budget set by the innermost :func:`request_budget` block of this thread, if any."""
    return _current.get()
