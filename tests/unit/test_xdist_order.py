"""The suite's own work units and their order under pytest-xdist (tests/xdist_order.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests import xdist_order


@dataclass
class _Item:
    nodeid: str
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


@dataclass
class _Cache:
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any) -> Any:
        return self.values.get(key, default)


@dataclass
class _Config:
    cache: _Cache


def test_a_file_parametrized_by_server_is_one_unit_per_server() -> None:
    assert xdist_order.unit_of("tests/a.py::test_x[embedded]") == "tests/a.py::[embedded]"
    assert xdist_order.unit_of("tests/a.py::test_x[real-with-3]") == "tests/a.py::[real]"
    assert xdist_order.unit_of("tests/a.py::T::test_y[realish]") == "tests/a.py"
    assert xdist_order.unit_of("tests/a.py::test_z") == "tests/a.py"


def _order(items: list[_Item], recorded: dict[str, float]) -> list[str]:
    config = _Config(_Cache({xdist_order.CACHE_KEY: recorded}))
    xdist_order.order_items(config, items)  # type: ignore[arg-type]
    return [i.nodeid for i in items]


def test_units_are_queued_longest_first_by_marker_estimate_and_kept_whole() -> None:
    items = [
        _Item("tests/unit/a.py::test_1"),
        _Item("tests/unit/a.py::test_2"),
        _Item("tests/slow.py::test_s[embedded]", ("slow",)),
        _Item("tests/chaos/c.py::test_c[embedded]", ("chaos", "slow")),
        _Item("tests/slow.py::test_s[real]", ("slow",)),
        _Item("tests/chaos/c.py::test_c[real]", ("chaos", "slow")),
    ]
    assert _order(items, {}) == [
        "tests/chaos/c.py::test_c[embedded]",
        "tests/chaos/c.py::test_c[real]",
        "tests/slow.py::test_s[embedded]",
        "tests/slow.py::test_s[real]",
        "tests/unit/a.py::test_1",
        "tests/unit/a.py::test_2",
    ]


def test_recorded_seconds_win_over_the_estimate() -> None:
    items = [
        _Item("tests/chaos/c.py::test_c[embedded]", ("chaos",)),
        _Item("tests/unit/a.py::test_1"),
        _Item("tests/unit/a.py::test_2"),
    ]
    recorded = {"tests/unit/a.py": 500.0, "tests/chaos/c.py::[embedded]": 40.0}
    assert _order(items, recorded) == [
        "tests/unit/a.py::test_1",
        "tests/unit/a.py::test_2",
        "tests/chaos/c.py::test_c[embedded]",
    ]
