"""A replica's journal of kept run records (k8slease.jobs.journal): the file the operator reads
when the replica dies before it can write a run's record itself (issue 26)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from k8slease import Jobs, TickLock
from k8slease.errors import ConfigError
from k8slease.jobs import journal as journal_module
from k8slease.jobs.journal import RunJournal, journal_path
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.keptruns import Journal, decode_journal
from tests.support.factories import make_lock
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import (
    LosingStore,
    clock_ending_retries,
    logged_events,
    succeeded_while_cut_off,
    tick_at,
)


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    with clock_ending_retries() as fake:
        yield fake


def _read(path: Path) -> Journal | None:
    return decode_journal(path.read_text())


def test_a_kept_record_is_in_the_journal_until_the_lock_writes_it(
    clock: FakeClock, tmp_path: Path
) -> None:
    path = tmp_path / "termination-log"
    store = LosingStore()
    journal = RunJournal(str(path))
    lock = make_lock(store, identity="r0", lock_at_most_for=30, clock=clock, journal=journal)

    tick = succeeded_while_cut_off(store, clock, lock)

    kept = _read(path)
    assert kept is not None and len(kept.runs) == 1
    (entry,) = kept.runs
    assert (entry.lease, entry.run.tick, entry.run.outcome) == ("g.job", tick, "succeeded")
    assert entry.run.fencing_token == store.view().fencing_token

    clock.advance(2)
    assert lock.try_acquire(tick_at(clock)) is not Verdict.RUNNING  # the next look writes it
    assert store.view().job.count("succeeded") == 1
    assert path.read_text() == "", "emptied once written"
    assert journal.kept() == ()


def test_the_locks_of_one_process_share_the_journal_of_one_path(
    clock: FakeClock, tmp_path: Path
) -> None:
    path = str(tmp_path / "journal")
    first, second = LosingStore(), LosingStore()
    r0 = make_lock(
        first, identity="r0", lock_at_most_for=30, clock=clock, journal=RunJournal.at(path)
    )
    r1 = make_lock(
        second, identity="r1", lock_at_most_for=30, clock=clock, journal=RunJournal.at(path)
    )
    assert RunJournal.at(path) is RunJournal.at(path)
    assert RunJournal.at(None) is not RunJournal.at(None)

    succeeded_while_cut_off(first, clock, r0)
    succeeded_while_cut_off(second, clock, r1)

    kept = _read(Path(path))
    assert kept is not None
    assert sorted(k.run.holder for k in kept.runs) == ["r0", "r1"], "neither overwrote the other"


def test_a_journal_that_cannot_be_written_is_said_once_and_never_fails_the_lock(
    clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = RunJournal(str(tmp_path / "missing-dir" / "journal"))
    store = LosingStore()
    lock = make_lock(store, identity="r0", lock_at_most_for=30, clock=clock, journal=journal)
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        succeeded_while_cut_off(store, clock, lock)
        clock.advance(2)
        lock.try_acquire(tick_at(clock))  # written: the journal is emptied (and fails again)
    assert logged_events(caplog).count("journal.write_failed") == 1
    assert store.view().job.count("succeeded") == 1, "the lock wrote its record all the same"


def test_the_journal_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log_file = tmp_path / "termination-log"
    monkeypatch.setattr(journal_module, "TERMINATION_LOG", str(log_file))
    assert journal_path("auto") is None, "no termination log here: no file"
    log_file.write_text("")
    assert journal_path("auto") == str(log_file)
    assert journal_path(None) is None
    assert journal_path(tmp_path / "j") == str(tmp_path / "j")
    for bad in ("", 5):
        with pytest.raises(ConfigError, match="journal must be"):
            journal_path(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("face", [Jobs, TickLock])
def test_jobs_and_ticklock_take_the_journal_option(
    face: type[Jobs] | type[TickLock], tmp_path: Path
) -> None:
    api_client = client.ApiClient()
    path = tmp_path / "journal"
    assert face("g", journal=path, api_client=api_client).journal.path == str(path)
    assert face("g", journal=None, api_client=api_client).journal.path is None
    with pytest.raises(ConfigError, match="journal must be"):
        face("g", journal=3, api_client=api_client)  # type: ignore[arg-type]
