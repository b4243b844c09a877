"""k8slease logs through stdlib logging under ``k8slease`` and never configures logging itself."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from k8slease.logs import get_logger, render_fields


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_with_nothing_configured_only_warnings_appear_and_only_on_stderr() -> None:
    result = run_python(
        """
        import structlog
        from k8slease import LeaderElector
        from k8slease.logs import get_logger
        log = get_logger("k8slease.elector").bind(lease="billing")
        log.debug("quiet.debug"); log.info("quiet.info"); log.warning("loud.warning", n=1)
        LeaderElector("billing", namespace="default", identity="a")
        print("configured" if structlog.is_configured() else "not configured")
        """
    )
    assert result.stdout == "not configured\n"
    assert "loud.warning lease=billing n=1" in result.stderr
    assert "quiet" not in result.stderr


def test_the_k8slease_logger_level_decides(caplog: pytest.LogCaptureFixture) -> None:
    log = get_logger("k8slease.jobs").bind(job="nightly")
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        log.info("job.started")
        log.debug("job.skipped", why="held")
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        log.debug("job.skipped", why="held by someone")
    [record] = caplog.records
    assert record.name == "k8slease.jobs" and record.levelno == logging.DEBUG
    assert record.getMessage() == "job.skipped job=nightly why='held by someone'"
    assert record.k8slease_event == "job.skipped"  # type: ignore[attr-defined]
    assert record.k8slease_fields == {"job": "nightly", "why": "held by someone"}  # type: ignore[attr-defined]


def test_exceptions_reach_stdlib_with_their_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="k8slease"):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            get_logger("k8slease.elector").exception("elector.crashed")
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert "elector.crashed" in caplog.text and "RuntimeError: boom" in caplog.text


def test_loggers_live_under_k8slease() -> None:
    with pytest.raises(ValueError, match="under 'k8slease'"):
        get_logger("app")
    assert render_fields({"a": 1, "b": "x y", "c": True}) == "a=1 b='x y' c=True"


def test_the_cli_configures_readable_console_output_for_itself() -> None:
    result = run_python(
        """
        from k8slease.cli.console import configure_console_logging
        from k8slease.logs import get_logger
        configure_console_logging()
        get_logger("k8slease.elector").info("leader.started", term=1)
        get_logger("k8slease.elector").debug("hidden")
        """
    )
    assert result.stdout == ""
    assert "INFO    k8slease.elector: leader.started term=1" in result.stderr
    assert "hidden" not in result.stderr
