"""``k8slease.testing.tools.run_tool``: the testing tiers' one way to run a tool and word its
failure (openssl, go, nsenter, ctr, kubectl, helm, apt-get)."""

from __future__ import annotations

import sys

import pytest

from k8slease.testing.tools import COMPLAINT_CHARS, run_tool


class ToolError(RuntimeError):
    pass


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_failure_is_left_to_the_caller_unless_it_names_the_error() -> None:
    result = run_tool(python("import sys; print('out'); sys.exit(3)"), timeout=30)
    assert (result.returncode, result.stdout) == (3, "out\n")


def test_a_named_failure_says_what_failed_its_status_and_its_stderr() -> None:
    argv = python("import sys; print('ignored'); sys.exit('no such key')")
    with pytest.raises(ToolError) as raised:
        run_tool(argv, timeout=30, failure=ToolError, what="openssl genpkey")
    assert str(raised.value) == "openssl genpkey failed (1): no such key"


def test_a_failure_without_stderr_shows_stdout_and_defaults_to_the_command_line() -> None:
    argv = python("import sys; print('  said on stdout  '); sys.exit(2)")
    with pytest.raises(ToolError, match=r"^.* -c .* failed \(2\): said on stdout$"):
        run_tool(argv, timeout=30, failure=ToolError)


def test_a_long_complaint_keeps_its_end() -> None:
    code = f"import sys; sys.stderr.write('x' * {3 * COMPLAINT_CHARS} + 'the cause'); sys.exit(1)"
    with pytest.raises(ToolError) as raised:
        run_tool(python(code), timeout=30, failure=ToolError, what="apt-get install")
    message = str(raised.value)
    assert message.endswith("the cause")
    assert len(message) == len("apt-get install failed (1): ") + COMPLAINT_CHARS


def test_success_returns_stdout_and_passes_env_and_input() -> None:
    code = "import os, sys; print(os.environ['K8SL_X'], sys.stdin.read())"
    result = run_tool(
        python(code), timeout=30, failure=ToolError, env={"K8SL_X": "set"}, input="fed"
    )
    assert result.stdout.split() == ["set", "fed"]
