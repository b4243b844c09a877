"""The benchmarks package has no import cycle (issue 24): each module can be read, and changed,
on its own terms."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The benchmarks modules ``path`` imports, also inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(
                a.name.split(".", 1)[1] for a in node.names if a.name.startswith("benchmarks.")
            )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "benchmarks":
                found.update(a.name for a in node.names)
            elif node.module.startswith("benchmarks."):
                found.add(node.module.split(".", 1)[1])
    return found & modules


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            if found := visit(target, [*path, node]):
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        if found := visit(start, []):
            return found
    return None


def test_no_import_cycle_in_benchmarks() -> None:
    modules = {p.stem for p in BENCHMARKS.glob("*.py")} - {"__init__"}
    graph = {m: imports_of(BENCHMARKS / f"{m}.py", modules) for m in modules}
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph) or [])}"


def test_the_cycle_finder_sees_a_lazy_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from benchmarks.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from benchmarks import a\n")
    graph = {m: imports_of(tmp_path / f"{m}.py", {"a", "b"}) for m in ("a", "b")}
    assert cycle(graph) == ["a", "b", "a"]
