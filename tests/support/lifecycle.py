"""Start a group of things (``Jobs``, electors) for a test and stop them all afterwards."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


@contextmanager
def all_started(group: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """``start()`` each of ``group`` in order; ``stop()`` each when the block ends, however."""
    for member in group:
        member.start()
    try:
        yield group
    finally:
        for member in group:
            member.stop()
