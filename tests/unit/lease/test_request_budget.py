"""The per-thread request budget (issue 22): set by callers, nested, read by the transport."""

from __future__ import annotations

import threading

import pytest

from k8slease.lease.budget import MIN_BUDGET, current_budget, request_budget


def test_a_budget_holds_for_its_block_and_thread_only() -> None:
    assert current_budget() is None
    seen: list[object] = []
    with request_budget(25.0, connect=10.0) as budget:
        assert current_budget() == budget
        assert (budget.total, budget.connect) == (25.0, 10.0)
        worker = threading.Thread(target=lambda: seen.append(current_budget()))
        worker.start()
        worker.join()
    assert seen == [None], "another thread has its own budget"
    assert current_budget() is None


def test_an_inner_budget_never_outlasts_the_outer_one() -> None:
    with request_budget(2.0), request_budget(30.0, connect=10.0) as inner:
        assert inner.total == pytest.approx(2.0, abs=0.05)
        assert inner.connect <= inner.total
    with request_budget(30.0), request_budget(5.0) as inner:
        assert inner.total == 5.0


def test_a_spent_budget_still_gives_a_request_a_moment_not_no_timeout() -> None:
    with request_budget(0.0) as budget:
        assert budget.total == MIN_BUDGET == budget.connect
    with request_budget(-3.0, connect=10.0) as budget:
        assert budget.total == MIN_BUDGET
