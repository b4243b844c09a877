"""How `make test` spreads the suite over pytest-xdist workers: work units, longest first.

`--dist loadfile` keeps a file's tests on one worker (module fixtures are set up once) but gave
the workers units of very unequal length in an unlucky order: xdist queues files by their number
of tests, so the single-test chaos scenarios (200 s each) started last and one worker ran alone
for minutes at the end. Here (``pytest_xdist_make_scheduler`` in tests/conftest.py):

* a work unit is a file, or, for a test parametrized by API server, a file's tests on one server
  (``tests/chaos/test_chaos_hostile.py::[real]``): the two servers' halves of a long file run on
  two workers at once;
* units are queued longest first (the classic longest-processing-time rule), by the seconds each
  took in the last run recorded in pytest's cache (``k8slease/unit-seconds``), else by an estimate
  from their markers (``chaos`` scenarios, then ``slow`` tests, then the rest), which is what a
  fresh checkout, as in CI, has.

Workers collect and order the tests (:func:`order_items`); the controller's scheduler keeps
that order (:func:`make_scheduler`) and records each unit's seconds (:class:`UnitClock`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest

CACHE_KEY = "k8slease/unit-seconds"
#: set in each worker's ``workerinput`` when the controller uses :func:`make_scheduler`
WORKER_FLAG = "k8slease_longest_first"
#: an estimate when the cache has no figure: seconds per test by its marker
ESTIMATE = {"chaos": 100.0, "slow": 2.0, "other": 0.1}
_SERVER = re.compile(r"\[(embedded|real)(?:-[^\]]*)?\]$")


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its file, with the API server when parametrized by one."""
    path = nodeid.split("::", 1)[0]
    server = _SERVER.search(nodeid)
    return f"{path}::[{server.group(1)}]" if server else path


def _estimate(item: pytest.Item) -> float:
    for marker in ("chaos", "slow"):
        if item.get_closest_marker(marker) is not None:
            return ESTIMATE[marker]
    return ESTIMATE["other"]


def order_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: whole units, longest first; a unit's own order is kept."""
    cache = getattr(config, "cache", None)
    recorded: dict[str, float] = cache.get(CACHE_KEY, {}) if cache is not None else {}
    estimate: dict[str, float] = defaultdict(float)
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = unit_of(item.nodeid)
        estimate[unit] += _estimate(item)
        first_seen.setdefault(unit, index)

    def cost(unit: str) -> float:
        return float(recorded.get(unit, estimate[unit]))

    items.sort(key=lambda item: (-cost(u := unit_of(item.nodeid)), first_seen[u]))


class UnitClock:
    """On the controller: each unit's seconds (setup, call, teardown), saved at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[unit_of(report.nodeid)] += report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is None or not self.seconds or exitstatus not in (0, 1):
            return  # an interrupted run's figures would mislead the next order
        merged = dict(cache.get(CACHE_KEY, {}))
        merged.update({unit: round(s, 2) for unit, s in self.seconds.items()})
        cache.set(CACHE_KEY, merged)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduler with our units, in the workers' order (no reordering by count)."""
    from xdist.scheduler import LoadScopeScheduling

    class LongestFirst(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return LongestFirst(config, log)
