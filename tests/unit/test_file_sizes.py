"""No source file outside ``k8slease/testing/`` is over 500 lines (issue 24, docs/architecture.md).

A file that long has more than one reason to change. The embedded API server and the real
control plane under ``k8slease/testing/`` are exempt: each follows an upstream component's
shape. The rule covers what git tracks: the package, the tests, the benchmarks, the examples and
the build's own scripts; prose and data (Markdown, YAML, JSON, TOML) are not code.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 500
EXEMPT = ("k8slease/testing/",)
#: What counts as source: by ending, or by whole name for files without one.
SOURCE_SUFFIXES = frozenset({".py", ".go", ".sh", ".c", ".tpl"})
SOURCE_NAMES = frozenset({"Makefile", "Dockerfile", "run"})


def is_source(path: str) -> bool:
    """Whether the tracked file ``path`` is code the rule covers."""
    if path.startswith(EXEMPT):
        return False
    name = Path(path).name
    return Path(path).suffix in SOURCE_SUFFIXES or name in SOURCE_NAMES


def tracked_files() -> list[str]:
    try:
        done = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.CalledProcessError) as exc:  # a tarball, not a checkout
        pytest.skip(f"not a git checkout: {exc}")
    return done.stdout.splitlines()


def too_long(paths: list[str], root: Path = ROOT) -> dict[str, int]:
    """The files among ``paths`` that the rule covers and that are over :data:`LIMIT` lines."""
    found = {}
    for path in paths:
        file = root / path
        if not is_source(path) or not file.is_file():
            continue
        lines = len(file.read_text(errors="replace").splitlines())
        if lines > LIMIT:
            found[path] = lines
    return found


def test_no_source_file_outside_testing_is_over_500_lines() -> None:
    paths = tracked_files()
    assert "k8slease/__init__.py" in paths  # the listing is the repository's
    assert not too_long(paths), f"split these (one reason to change per file): {too_long(paths)}"


def test_the_rule_sees_a_long_file_and_spares_the_exempt_and_prose(tmp_path: Path) -> None:
    long_text = "x = 1\n" * (LIMIT + 1)
    for path in ("tests/a.py", "k8slease/testing/b.py", "docs/c.md", "Makefile", "ok.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n" * LIMIT if path == "ok.py" else long_text)
    paths = ["tests/a.py", "k8slease/testing/b.py", "docs/c.md", "Makefile", "ok.py"]
    assert too_long(paths, tmp_path) == {"tests/a.py": LIMIT + 1, "Makefile": LIMIT + 1}
