"""The operator merges the journal of a replica that died before it could write a run's record
(k8slease.operator.podjournals, issue 26): from the Pod's status into the job Lease, once."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from k8slease.errors import Unavailable
from k8slease.jobs.journal import RunJournal
from k8slease.jobs.lock import Grant
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.keptruns import merged_journals
from k8slease.lease.store import LeaseStore
from k8slease.operator.podjournals import JournalMerger, judge_merge, own_record, pod_journals
from k8slease.operator.settings import OperatorConfig
from tests.support.factories import make_lock
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import (
    LosingStore,
    clock_ending_retries,
    succeeded_while_cut_off,
    tick_at,
)

CONTAINER = "containerd://0123abcd"


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    with clock_ending_retries() as fake:
        yield fake


def _pod(
    message: str,
    *,
    key: str = "state",
    container_id: str | None = CONTAINER,
    name: str = "r0",
) -> dict[str, Any]:
    terminated: dict[str, Any] = {
        "exitCode": 137,
        "message": message,
        "startedAt": "2026-12-03T12:00:00Z",
    }
    if container_id is not None:
        terminated["containerID"] = container_id
    return {
        "metadata": {"name": name, "namespace": "default"},
        "status": {"containerStatuses": [{"name": "app", key: {"terminated": terminated}}]},
    }


def _cut_off_replica(tmp_path: Path, store: LosingStore, clock: FakeClock) -> tuple[Path, datetime]:
    """r0 ran a tick and succeeded while cut off: its record is kept, in its journal too."""
    path = tmp_path / "termination-log"
    r0 = make_lock(
        store, identity="r0", lock_at_most_for=30, clock=clock, journal=RunJournal(str(path))
    )
    return path, succeeded_while_cut_off(store, clock, r0)


def _taken_over(store: LosingStore, clock: FakeClock) -> None:
    """r1 takes the lock over once r0's has expired (recording r0's tick lost), runs a tick."""
    r1 = make_lock(store, identity="r1", lock_at_most_for=30, clock=clock)
    assert r1.try_acquire(tick_at(clock, 1)) is Verdict.HELD
    clock.advance(31)
    grant = r1.try_acquire(tick_at(clock))
    assert isinstance(grant, Grant)
    r1.finish(grant, "succeeded")


def _merger(store: LosingStore, clock: FakeClock, tries: int = 12) -> JournalMerger:
    settings = OperatorConfig(
        write_backoff_initial=0.001, write_backoff_max=0.01, journal_tries=tries
    )
    return JournalMerger(lambda namespace: LeaseStore(store), settings, now=clock)


def _merge(merger: JournalMerger, pod: dict[str, Any]) -> list[list[str]]:
    return [merger.merge(found) for found in pod_journals(pod)]


def test_a_run_recorded_lost_by_a_takeover_gets_its_real_outcome_from_the_journal(
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    store = LosingStore()
    path, _ = _cut_off_replica(tmp_path, store, clock)
    _taken_over(store, clock)
    job = store.view().job
    assert (job.count("lost"), job.count("succeeded")) == (1, 1)
    pod = _pod(path.read_text())  # r0 died: its container's termination message

    assert _merge(_merger(store, clock), pod) == [["merged"]]

    view = store.view()
    assert (view.job.count("lost"), view.job.count("succeeded")) == (0, 2)
    assert merged_journals(view.body) == (CONTAINER,)
    assert view.record.holder == "", "the lock record is left as it was: free"
    r1 = make_lock(store, identity="r1", lock_at_most_for=30, clock=clock)
    clock.advance(2)
    later = r1.try_acquire(tick_at(clock))
    assert isinstance(later, Grant)
    r1.finish(later, "succeeded")  # the last run is r1's again: merged again, r0's would count
    assert (store.view().job.count("lost"), store.view().job.count("succeeded")) == (0, 3)
    writes = store.writes
    # the Pod's next event, and an operator restarted (a new merger): never merged twice
    assert _merge(_merger(store, clock), pod) == [["nothing"]]
    assert _merge(_merger(store, clock), _pod(path.read_text(), key="lastState")) == [["nothing"]]
    assert store.writes == writes


def test_a_lock_still_held_by_the_dead_replicas_grant_is_released_with_its_record(
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    store = LosingStore()
    path, tick = _cut_off_replica(tmp_path, store, clock)
    assert store.view().record.holder == "r0"

    assert _merge(_merger(store, clock), _pod(path.read_text())) == [["released"]]

    view = store.view()
    assert view.record.holder == ""
    assert view.job.last_run is not None and view.job.last_run.tick == tick
    assert (view.job.count("succeeded"), view.job.completed_tick) == (1, tick)
    r1 = make_lock(store, identity="r1", lock_at_most_for=30, clock=clock)
    clock.advance(1)
    assert isinstance(r1.try_acquire(tick_at(clock)), Grant), "the next tick at once, no expiry"


def test_a_journal_whose_record_the_lease_holds_already_writes_nothing(
    clock: FakeClock, tmp_path: Path
) -> None:
    store = LosingStore()
    path, _ = _cut_off_replica(tmp_path, store, clock)
    message = path.read_text()
    r0 = make_lock(store, identity="r0", lock_at_most_for=30, clock=clock)
    r0._unwritten = pod_journals(_pod(message))[0].journal.runs[0].run
    clock.advance(1)
    r0.try_acquire(tick_at(clock))  # the replica wrote it itself before it died
    writes = store.writes
    assert _merge(_merger(store, clock), _pod(message)) == [["nothing"]]
    assert store.writes == writes


def test_only_job_leases_that_read_well_are_merged_into(clock: FakeClock, tmp_path: Path) -> None:
    store = LosingStore()
    path, _ = _cut_off_replica(tmp_path, store, clock)
    (found,) = pod_journals(_pod(path.read_text()))
    run = found.journal.runs[0].run
    view = store.view()
    assert judge_merge(view, run, container_id=CONTAINER, now=clock.now()) is not None
    not_a_job = copy.deepcopy(view.body)
    not_a_job["metadata"]["labels"]["k8slease.io/role"] = "leader"
    garbled = copy.deepcopy(view.body)
    garbled["spec"]["leaseDurationSeconds"] = "soon"
    for body in (not_a_job, garbled):
        assert (
            judge_merge(type(view).decode(body), run, container_id=CONTAINER, now=clock.now())
            is None
        )


def test_what_a_pod_carries() -> None:
    foreign = _pod("OOMKilled")
    assert pod_journals(foreign) == []
    assert pod_journals({"metadata": "garbage", "status": 5}) == []
    assert (
        pod_journals(
            {"metadata": {"name": "p", "namespace": "n"}, "status": {"containerStatuses": [5]}}
        )
        == []
    )
    message = '{"k8slease.io/kept-runs": []}'
    (by_id,) = pod_journals(_pod(message))
    assert (by_id.namespace, by_id.pod, by_id.container_id) == ("default", "r0", CONTAINER)
    (no_id,) = pod_journals(_pod(message, key="lastState", container_id=None))
    assert no_id.container_id == "default/r0/app/2026-12-03T12:00:00Z"


class _AwayThenBack(LosingStore):
    """The API server answers nothing for the first ``away`` reads."""

    def __init__(self, away: int) -> None:
        super().__init__()
        self.away = away

    def get(self, name: str) -> dict[str, Any]:
        if self.away:
            self.away -= 1
            raise Unavailable("timed out", status=None)
        return super().get(name)


def test_a_journal_is_merged_once_the_api_server_answers_again(
    clock: FakeClock, tmp_path: Path
) -> None:
    store = _AwayThenBack(away=0)
    path, _ = _cut_off_replica(tmp_path, store, clock)
    _taken_over(store, clock)
    store.away = 2
    merger = _merger(store, clock)

    async def scenario() -> None:
        merger.on_pod(_pod(path.read_text()))
        merger.on_pod(_pod(path.read_text()))  # the same journal again: one task
        assert len(merger._tasks) == 1
        await asyncio.gather(*merger._tasks.values())

    asyncio.run(scenario())
    assert store.away == 0
    assert store.view().job.count("lost") == 0
    assert merged_journals(store.view().body) == (CONTAINER,)


@pytest.mark.parametrize("tries", [1, 3])
def test_a_journal_not_merged_after_its_tries_is_said_at_error(
    clock: FakeClock, tmp_path: Path, tries: int, caplog: pytest.LogCaptureFixture
) -> None:
    store = _AwayThenBack(away=0)
    path, _ = _cut_off_replica(tmp_path, store, clock)
    store.away = 100
    merger = _merger(store, clock, tries)

    async def scenario() -> None:
        merger.on_pod(_pod(path.read_text()))
        await asyncio.gather(*merger._tasks.values())

    with caplog.at_level("WARNING", logger="k8slease"):
        asyncio.run(scenario())
    events = [getattr(r, "k8slease_event", "") for r in caplog.records]
    assert events.count("operator.journal_merge_failed") == tries
    assert events[-1] == "operator.journal_not_merged"
    assert store.away == 100 - tries


def test_a_pod_speaks_only_for_its_own_records(clock: FakeClock, tmp_path: Path) -> None:
    """A journal is a Pod's word: a record held by another identity (another replica's tick it
    would like to see recorded succeeded) is skipped, said at WARNING, and nothing is written."""
    store = LosingStore()
    path, _ = _cut_off_replica(tmp_path, store, clock)
    _taken_over(store, clock)
    writes = store.writes
    assert _merge(_merger(store, clock), _pod(path.read_text(), name="intruder")) == [["foreign"]]
    assert store.writes == writes
    assert store.view().job.count("lost") == 1
    assert own_record("app-7d9f", "app-7d9f") and own_record("app-7d9f", "app-7d9f-x1b2c")
    assert not own_record("app", "app7d9f") and not own_record("app-7", "app-7d9f")


@pytest.mark.parametrize(
    ("pod", "holder", "own"),
    [
        ("billing-7d9f8c6b5-p0w3n", "billing-7d9f8c6b5-p0w3n", True),  # identity=POD_NAME
        ("billing-7d9f8c6b5-p0w3n", "billing-7d9f8c6b5-p0w3n-ab12c", True),  # the default
        ("billing-7d9f8c6b5-p0w3n", "billing-7d9f8c6b5-p0w3n-worker1", True),
        # a Pod whose name is only the start of another replica's identity
        ("billing", "billing-7d9f8c6b5-p0w3n-ab12c", False),
        ("billing-7d9f8c6b5", "billing-7d9f8c6b5-p0w3n-ab12c", False),
        ("billing-7d9f8c6b5-p0w3n", "billing-7d9f8c6b5-p0w3n-", False),
        ("billing-7d9f8c6b5-p0w3n", "billing-7d9f8c6b5-p0w3n-a/b", False),
        ("billing-7d9f8c6b5-p0w3n", "billing-7d9f8c6b5-p0w3", False),
    ],
)
def test_a_pod_named_like_the_start_of_an_identity_is_not_its_owner(
    pod: str, holder: str, own: bool
) -> None:
    assert own_record(pod, holder) is own
