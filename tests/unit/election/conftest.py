"""Fixtures of the elector's unit tests: the in-memory Lease store, and the list of electors a
test made (``make_elector`` appends to it), each stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from k8slease import LeaderElector
from tests.unit.election.elector_memstore import MemoryLeaseStore


@pytest.fixture
def store() -> MemoryLeaseStore:
    return MemoryLeaseStore()


@pytest.fixture
def electors() -> Iterator[list[LeaderElector]]:
    made: list[LeaderElector] = []
    yield made
    for elector in made:
        elector.stop(timeout=5)
