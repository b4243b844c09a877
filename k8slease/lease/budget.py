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
their own. Blocks nest: an inner budget never outlasts the outer one (a LEADER-class job's
claim, bounded by the lock, is also bounded by the time its leadership has left).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: The shortest budget given to a request: below it an attempt cannot succeed anyway, and a
#: zero or negative timeout would mean "no timeout" or an error to urllib3.
MIN_BUDGET = 0.05


@dataclass(frozen=True, slots=True)
class Budget:
    """The bound of the whole request (``total``) and of opening its connection (``connect``);
    ``deadline`` (``time.monotonic``) is when the block's budget runs out, for inner blocks."""

    total: float
    connect: float
    deadline: float


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "k8slease_request_budget", default=None
)


@contextmanager
def request_budget(total: float, *, connect: float | None = None) -> Iterator[Budget]:
    """Bound the requests this thread sends in the block by ``total`` seconds each (at least
    :data:`MIN_BUDGET`), their connect phase by ``connect`` (default: ``total``); never past
    the deadline of an enclosing block."""
    now = time.monotonic()
    whole = float(total)
    outer = _current.get()
    if outer is not None:
        whole = min(whole, outer.deadline - now)
    whole = max(MIN_BUDGET, whole)
    opening = whole if connect is None else max(MIN_BUDGET, min(float(connect), whole))
    budget = Budget(total=whole, connect=opening, deadline=now + whole)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current_budget() -> Budget | None:
    """The budget set by the innermost :func:`request_budget` block of this thread, if any."""
    return _current.get()
