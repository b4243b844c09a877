"""The test tree is one package (issue 24): every directory of Python files under tests/ has an
``__init__.py``, helpers are imported as ``tests.<dir>.<module>`` from the repository root (never
by bare name), and no file edits ``sys.path`` (a helper found by bare name through a path edit
hides which of two same-named modules runs, and breaks when a file moves)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PY_FILES = sorted(TESTS.rglob("*.py"))


def path_edits(source: str, filename: str = "<probe>") -> list[int]:
    """The lines of ``source`` that touch ``sys.path`` or ``site.addsitedir`` in code (not in
    strings): any use of the attribute ``path`` of a name ``sys``, however it is called."""
    lines = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in (("sys", "path"), ("site", "addsitedir")):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            lines.extend(node.lineno for alias in node.names if alias.name == "path")
    return lines


def test_no_file_under_tests_edits_sys_path() -> None:
    assert len(PY_FILES) > 100  # the walk found the tree
    edits = {
        str(p.relative_to(TESTS)): found
        for p in PY_FILES
        if (found := path_edits(p.read_text(), str(p)))
    }
    assert not edits, f"sys.path used (import by package instead, tests.x.y): {edits}"


def test_every_test_directory_is_a_package() -> None:
    missing = sorted(
        str(d.relative_to(TESTS)) or "."
        for d in {p.parent for p in PY_FILES}
        if not (d / "__init__.py").exists()
    )
    assert not missing, f"directories under tests/ without __init__.py: {missing}"


def bare_imports(source: str, local: set[str], filename: str = "<probe>") -> list[str]:
    """The modules of ``local`` (names of helper modules under tests/) that ``source`` imports
    by bare name (``import ticks``, ``from fakeclock import FakeClock``), which only a
    ``sys.path`` edit could make work."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in local]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module] if node.module.split(".")[0] in local else []
    return found


def test_no_helper_is_imported_by_bare_name() -> None:
    local = {p.stem for p in PY_FILES if p.stem != "__init__"} | {"render_manifests"}
    bare = {
        str(p.relative_to(TESTS)): found
        for p in PY_FILES
        if (found := bare_imports(p.read_text(), local, str(p)))
    }
    assert not bare, f"import these as tests.<dir>.<module> (tests/support/...): {bare}"


def test_the_check_sees_a_bare_import() -> None:
    local = {"fakeclock", "elector_memstore"}
    assert bare_imports("from fakeclock import FakeClock\nimport elector_memstore\n", local) == [
        "fakeclock",
        "elector_memstore",
    ]
    assert bare_imports("from tests.support.fakeclock import FakeClock\n", local) == []


def test_the_check_sees_a_path_edit() -> None:
    assert path_edits("import sys\nsys.path.insert(0, 'x')\n") == [2]
    assert path_edits("import sys\nif 'x' not in sys.path:\n    pass\n") == [2]
    assert path_edits("from sys import path\npath.append('x')\n") == [1]
    assert path_edits("import site\nsite.addsitedir('x')\n") == [2]
    assert path_edits('"""tests/ is on sys.path"""\nimport sys\nsys.exit(0)\n') == []
