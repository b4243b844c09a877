"""Foreign strings (from Leases other processes write) are printed escaped and bounded."""

from __future__ import annotations

import logging

import pytest

from k8slease.logs import get_logger
from k8slease.operator.history import Failover, Notice
from k8slease.shown import LIMIT, shown

HOSTILE = "\x1b[2J\x1b]0;owned\x07evil\nINFO forged line\r\x00\u202etxt.exe\x7f\x9b"


def printable_line(text: str) -> bool:
    return text.isprintable() and "\x1b" not in text and "\n" not in text


def test_control_characters_ansi_and_newlines_are_escaped() -> None:
    out = shown(HOSTILE)
    assert printable_line(out)
    assert out == (
        "\\x1b[2J\\x1b]0;owned\\x07evil\\nINFO forged line\\r\\x00\\u202etxt.exe\\x7f\\x9b"
    )


@pytest.mark.parametrize("value", ["replica-0_5f1c", "pod a (node b)", "réplica-ü-東京", ""])
def test_ordinary_strings_are_shown_as_they_are(value: str) -> None:
    assert shown(value) == value


def test_a_backslash_is_doubled_so_an_escape_cannot_be_forged() -> None:
    assert shown("a\\x1b") == "a\\\\x1b"
    assert shown("a\x1b") == "a\\x1b"
    assert shown("a\\x1b") != shown("a\x1b")


def test_a_long_string_is_cut_and_says_how_much() -> None:
    out = shown("x" * 1_048_576)
    assert out == "x" * LIMIT + f"...(+{1_048_576 - LIMIT} chars)"
    assert shown("y" * 10, limit=4) == "yyyy...(+6 chars)"
    assert shown("y" * 4, limit=4) == "yyyy"


def test_log_lines_escape_and_bound_fields_and_events(caplog: pytest.LogCaptureFixture) -> None:
    log = get_logger("k8slease.test")
    with caplog.at_level(logging.INFO, logger="k8slease"):
        log.info(f"leader is {HOSTILE}", holder=HOSTILE, job="x" * 1_000_000, ok="plain")
    (record,) = caplog.records
    line = record.getMessage()
    assert printable_line(line), line
    assert len(line) < 4000, "a 1 MB identity is not logged in full"
    assert "ok=plain" in line
    assert f"...(+{1_000_000 - LIMIT} chars)" in line
    fields = record.k8slease_fields  # type: ignore[attr-defined]
    assert all(printable_line(v) and len(v) < 2 * LIMIT for v in fields.values())
    assert printable_line(record.k8slease_event)  # type: ignore[attr-defined]


def test_the_operators_event_messages_are_escaped() -> None:
    from datetime import UTC, datetime

    took = Failover("a\x1b[31m", f"b\n{HOSTILE}", datetime(2026, 12, 1, tzinfo=UTC), "expired")
    notice = Notice("Normal", "LeaderElected", took.describe())
    assert printable_line(notice.message)
    assert notice.message.startswith("b\\n\\x1b[2J")
    assert len(Notice("Normal", "X", "z" * 1_000_000).message) < 1000
