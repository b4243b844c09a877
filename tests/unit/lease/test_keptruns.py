"""The journal's format and the Lease's list of merged journals (k8slease.lease.keptruns)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from k8slease.lease.jobrecord import Outcome, RunRecord
from k8slease.lease.keptruns import (
    MERGED_KEPT,
    KeptRun,
    decode_journal,
    encode_journal,
    merged_journals,
    with_merged_journal,
)
from k8slease.names import ANN_JOURNALS_MERGED, JOURNAL_KEY
from tests.support.factories import make_run

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _run(minute: int, outcome: Outcome = "succeeded", error: str | None = None) -> RunRecord:
    tick = T0 + timedelta(minutes=minute)
    return make_run(tick, outcome, token=7 + minute, holder="pod-a-x1", took=5, error=error)


def test_a_journal_decodes_to_the_records_it_was_made_of() -> None:
    kept = [KeptRun("g.report", _run(0)), KeptRun("g.invoice", _run(1, "failed", "boom"))]
    text, cut = encode_journal(kept)
    journal = decode_journal(text)
    assert cut == 0
    assert journal is not None and journal.problems == ()
    assert sorted(journal.runs, key=lambda k: k.lease) == sorted(kept, key=lambda k: k.lease)


def test_nothing_kept_is_an_empty_journal() -> None:
    assert encode_journal([]) == ("", 0)


def test_a_journal_over_the_termination_message_limit_keeps_the_newest_records() -> None:
    kept = [KeptRun(f"g.job{minute}", _run(minute, error="x" * 1000)) for minute in range(40)]
    text, cut = encode_journal(kept)
    journal = decode_journal(text)
    assert journal is not None
    assert len(text.encode()) <= 4096
    assert cut == 40 - len(journal.runs) > 0
    newest = sorted(kept, key=lambda k: k.run.finished)[-len(journal.runs) :]
    assert {k.lease for k in journal.runs} == {k.lease for k in newest}
    assert all(len(k.run.error or "") <= 120 for k in journal.runs), "error texts cut short"


@pytest.mark.parametrize(
    "message",
    [None, "", "OOMKilled", "panic: runtime error", "{}", "[1, 2]", '{"a": 1}', "{" * 100000],
)
def test_a_message_that_is_not_a_journal_decodes_to_none(message: object) -> None:
    assert decode_journal(message) is None


def test_entries_that_do_not_decode_are_skipped_and_named() -> None:
    good = json.loads(encode_journal([KeptRun("g.job", _run(0))])[0])[JOURNAL_KEY][0]
    bad_run = {"lease": "g.other", "run": {**good["run"], "outcome": "maybe"}}
    text = json.dumps({JOURNAL_KEY: [good, "garbage", {"lease": ""}, bad_run]})
    journal = decode_journal(text)
    assert journal is not None
    assert [k.lease for k in journal.runs] == ["g.job"]
    assert len(journal.problems) == 3
    assert any("g.other" in p and "outcome" in p for p in journal.problems)


def _lease(merged: object) -> dict[str, object]:
    return {"metadata": {"annotations": {ANN_JOURNALS_MERGED: merged}}}


def test_the_merged_journals_of_a_lease_are_read_back_and_kept_bounded() -> None:
    lease: dict[str, object] = {"metadata": {}}
    for number in range(MERGED_KEPT + 3):
        lease = _lease(with_merged_journal(lease, f"containerd://{number}")[ANN_JOURNALS_MERGED])
    merged = merged_journals(lease)
    assert len(merged) == MERGED_KEPT
    assert merged[-1] == f"containerd://{MERGED_KEPT + 2}", "the newest last"
    assert "containerd://0" not in merged


@pytest.mark.parametrize(
    ("garbled", "read"), [("not json", ()), ("{}", ()), ('[1, "a"]', ("a",)), (5, ())]
)
def test_a_hand_edited_merged_list_reads_as_its_strings_or_nothing(
    garbled: object, read: tuple[str, ...]
) -> None:
    assert merged_journals(_lease(garbled)) == read
