"""``mypy --strict`` refuses wrong callbacks; the public API exports what the README shows."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import k8slease
from k8slease import ConfigError, LeaderElector

REPO = Path(__file__).resolve().parents[2]

SNIPPET = textwrap.dedent(
    """
    from k8slease import AsyncLeaderElector, LeaderElector, LeadershipContext

    def two(a: int, b: int) -> None: ...
    def takes_int(x: int) -> None: ...
    def lead(ctx: LeadershipContext) -> None: ...
    async def lead_async(ctx: LeadershipContext) -> None: ...

    LeaderElector("x", on_started_leading=two)              # line 9: wrong
    LeaderElector("x", on_stopped_leading=takes_int)        # line 10: wrong
    LeaderElector("x", on_new_leader=takes_int)             # line 11: wrong
    LeaderElector("x", on_started_leading=lead, on_stopped_leading=lambda: None)
    LeaderElector("x", on_started_leading=lead_async, on_new_leader=print)
    LeaderElector("x", on_started_leading=lambda: print("leading"))
    AsyncLeaderElector("x", on_started_leading=lead_async)
    """
)


#: The cache ``make lint`` fills (the Makefile's MYPY_CACHE): warm, this check takes about 1 s
#: instead of about 18 in a fresh clone.
MYPY_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "k8slease" / "mypy"


@pytest.mark.slow
def test_mypy_strict_refuses_callbacks_of_the_wrong_shape(tmp_path: Path) -> None:
    pytest.importorskip("mypy")  # a dev tool: absent from the floor-versions venv
    source = tmp_path / "app.py"
    source.write_text(SNIPPET)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(MYPY_CACHE),
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    lines = sorted(
        {int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line}
    )
    assert lines == [9, 10, 11], result.stdout


def test_the_api_client_must_be_an_api_client() -> None:
    with pytest.raises(ConfigError, match=r"api_client must be a kubernetes\.client\.ApiClient"):
        LeaderElector("billing", namespace="default", identity="a", api_client="http://x")  # type: ignore[arg-type]


def test_the_public_api_exports_the_async_elector_and_callback_types() -> None:
    for name in ("AsyncLeaderElector", "LeadershipCallback", "NewLeaderCallback"):
        assert name in k8slease.__all__ and hasattr(k8slease, name)
