"""The one shared wait for a condition that nothing announces (``tests.support.polling``).

Use it only where the other side is another process, a real server or a real cluster, or a
thread whose state no event exposes; wait on an Event, a fake clock (tests/support/fakeclock.py), a
watch or ``Stats.wait_until`` wherever the code under test can say when it is done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(what: str, probe: Callable[[], T | None], within: float, every: float = 0.05) -> T:
    """``probe()`` every ``every`` seconds until it returns something truthy, which it returns;
    fails with ``what`` and the last answer after ``within`` seconds."""
    deadline = time.monotonic() + within
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within:.1f} s; last: {last!r}")
        time.sleep(every)  # the only polling sleep of the suite: see the docstring
