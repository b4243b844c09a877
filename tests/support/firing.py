"""Firing one tick on several replicas at once (``tests.support.firing``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from k8slease import Jobs


def fire_together(
    replicas: Sequence[Jobs], job: str, tick: datetime, *, within: float = 30.0
) -> list[str | None]:
    """Fire ``job`` for ``tick`` on every replica, each on its own thread, released together by
    a barrier so the claims race; returns the outcomes (``Jobs.fire``'s answers) in the order
    they came. Each thread is waited for up to ``within`` s: a hung one leaves its outcome
    out, which the caller's count of outcomes then shows."""
    barrier = threading.Barrier(len(replicas))
    outcomes: list[str | None] = []

    def fire(jobs: Jobs) -> None:
        barrier.wait()
        outcomes.append(jobs.fire(job, tick))

    threads = [threading.Thread(target=fire, args=(jobs,)) for jobs in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(within)
    return outcomes
