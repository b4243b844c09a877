"""An async term's work ends when its clean-up has: the release waits for it.

``on_started_leading`` written as ``async def`` is cancelled the moment leadership ends; its
``except CancelledError`` / ``finally`` code still acts as the leader (it flushes, it closes a
connection, it writes a last row). Released before that clean-up is over, the Lease would let
another replica start beside it. The sync callback's case is in test_elector.py.
"""

from __future__ import annotations

import asyncio
import threading

from k8slease import AsyncLeaderElector, LeaderElector, LeadershipContext
from k8slease.lease.record import record_from_lease
from tests.support.timing import MEMORY_FAST as FAST
from tests.unit.election.elector_memstore import MemoryLeaseStore, memory_options


def holder(store: MemoryLeaseStore) -> str:
    return record_from_lease(store.get("demo")).holder


def _count_postponed_releases(elector: LeaderElector) -> threading.Semaphore:
    held_back = threading.Semaphore(0)
    machine = elector._runner.machine
    postpone = machine.release_postponed

    def counted(now: float) -> None:
        postpone(now)
        held_back.release()

    machine.release_postponed = counted  # type: ignore[method-assign]
    return held_back


def test_no_release_is_sent_while_a_cancelled_async_term_still_cleans_up(
    store: MemoryLeaseStore,
) -> None:
    steps: list[str] = []

    async def main() -> None:
        cleaning = asyncio.Event()
        finish = asyncio.Event()

        async def lead(ctx: LeadershipContext) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cleaning.set()
                await finish.wait()  # the clean-up, still the leader's work
                steps.append(f"clean-up done, holder {holder(store)!r}")
                raise

        options = memory_options(store, defaults=FAST, on_started_leading=lead)
        elector = AsyncLeaderElector("demo", identity="a", handle_signals=False, **options).start()
        assert await elector.wait_until_leading(5)
        held_back = _count_postponed_releases(elector.elector)
        stopping = asyncio.create_task(elector.stop())
        await asyncio.wait_for(cleaning.wait(), 5)
        for _ in range(2):
            assert await asyncio.to_thread(held_back.acquire, True, 5), "release not held back"
        assert holder(store) == "a", "released while the clean-up still ran"
        assert not stopping.done()
        finish.set()
        await asyncio.wait_for(stopping, 5)

    asyncio.run(main())
    assert steps == ["clean-up done, holder 'a'"]
    assert holder(store) == ""
