"""Exponential backoff with jitter, for request paths that retry after a failure."""

from __future__ import annotations

import random


def backoff_delay(attempt: int, *, initial: float, cap: float, rng: random.Random) -> float:
    """The pause before retry number ``attempt`` (1 after the first failure).

    ``initial * 2 ** (attempt - 1)``, never more than ``cap``, then jittered down to between half
    and all of it, so replicas that failed together do not retry together.
    """
    if attempt < 1:
        return 0.0
    ceiling = min(cap, initial * 2.0 ** min(attempt - 1, 60))
    return ceiling * (0.5 + 0.5 * rng.random())
