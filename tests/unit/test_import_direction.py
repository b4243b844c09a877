"""The package's wings import only downward, and no module imports itself round a cycle: in
k8slease/, and across the repository (benchmarks/, tests/, examples/ too; issue 24). k8slease
imports neither the benchmarks nor the tests; the benchmarks import k8slease, never the tests.

Read from the source with :mod:`ast` (every ``import`` counts, also those inside functions), so the
rule holds for lazy imports too. The order, lowest first, is the one docs/architecture.md draws:
the foundation modules at the package root, then ``kube``, ``lease``, ``election``, ``jobs``, then
``operator`` and ``cli``; ``testing`` (the embedded API server) imports nothing outside itself.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "k8slease"

#: wing -> rank; a module may import from its own wing or from a wing of lower rank.
RANKS: dict[str, int] = {
    "root": 0,
    "kube": 1,
    "lease": 2,
    "election": 3,
    "jobs": 4,
    "operator": 5,
    "cli": 6,
    "api": 7,  # k8slease/__init__.py and __main__.py: the public face over everything
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def wing_of(module: str) -> str:
    parts = module.split(".")
    if module in ("k8slease", "k8slease.__main__"):
        return "api"
    if len(parts) == 2:
        return "root"
    return parts[1]


def imports_of(path: Path) -> set[str]:
    """The k8slease modules ``path`` imports (``from a.b import c`` also names module ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("k8slease"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith("k8slease"):
                continue
            found.add(node.module)
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if candidate in MODULES:
                    found.add(candidate)
    return found


MODULES: dict[str, Path] = {module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH: dict[str, set[str]] = {m: imports_of(p) & MODULES.keys() for m, p in MODULES.items()}


def test_every_module_is_in_a_known_wing() -> None:
    unknown = {m for m in MODULES if wing_of(m) not in RANKS and wing_of(m) != "testing"}
    assert not unknown, f"modules outside the known wings: {sorted(unknown)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if wing_of(m) != "testing"))
def test_imports_go_down(module: str) -> None:
    rank = RANKS[wing_of(module)]
    upward = sorted(
        target
        for target in GRAPH[module]
        if wing_of(target) != "testing" and RANKS[wing_of(target)] > rank
    )
    assert not upward, f"{module} ({wing_of(module)}) imports upward: {upward}"


def test_testing_imports_nothing_outside_itself() -> None:
    outside = sorted(
        (module, target)
        for module in MODULES
        if wing_of(module) == "testing"
        for target in GRAPH[module]
        if wing_of(target) != "testing"
    )
    assert not outside, f"k8slease.testing imports the package above it: {outside}"


def test_only_the_cli_imports_testing() -> None:
    users = sorted(
        module
        for module in MODULES
        if wing_of(module) not in ("testing", "cli")
        and any(wing_of(target) == "testing" for target in GRAPH[module])
    )
    assert not users, f"runtime modules import the test server: {users}"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if target == node:
                continue
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycles() -> None:
    # a package's __init__ importing its own submodules is not a cycle of the code that matters
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in GRAPH.items()}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"k8slease.a": {"k8slease.b"}, "k8slease.b": {"k8slease.a"}}) == [
        "k8slease.a",
        "k8slease.b",
        "k8slease.a",
    ]
    assert find_cycle({"k8slease.a": {"k8slease.b"}, "k8slease.b": set()}) is None


def test_the_direction_rule_sees_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from k8slease.jobs.registry import Jobs\n")
    assert "k8slease.jobs.registry" in imports_of(source)
    assert RANKS[wing_of("k8slease.jobs.registry")] > RANKS[wing_of("k8slease.kube.events")]


#: The importable trees of the repository, read from the root (``pythonpath = ["."]``).
TREES = ("k8slease", "benchmarks", "tests", "examples", "charts")


def repo_module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def repo_imports_of(path: Path, modules: Collection[str], name: str | None = None) -> set[str]:
    """The repository modules ``path`` (module ``name``, by default read from its place) imports,
    also inside functions; relative imports resolved; ``from a import b`` names ``a.b`` where
    that is a module."""
    here = (name or repo_module_name(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules}


def repo_graph() -> dict[str, set[str]]:
    paths = {repo_module_name(p): p for tree in TREES for p in (REPO / tree).rglob("*.py")}
    graph = {m: repo_imports_of(p, paths.keys()) for m, p in paths.items()}
    # a package's __init__ importing its own submodules is not a cycle of the code that matters
    return {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}


REPO_GRAPH = repo_graph()


def test_no_import_cycle_in_the_repository() -> None:
    assert {m.split(".")[0] for m in REPO_GRAPH} >= {"k8slease", "benchmarks", "tests"}
    assert find_cycle(REPO_GRAPH) is None, (
        f"import cycle: {' -> '.join(find_cycle(REPO_GRAPH) or [])}"
    )


@pytest.mark.parametrize(
    ("importer", "forbidden"),
    [("k8slease", ("benchmarks", "tests", "examples")), ("benchmarks", ("tests",))],
)
def test_imports_between_trees_go_one_way(importer: str, forbidden: tuple[str, ...]) -> None:
    wrong = sorted(
        (module, target)
        for module, targets in REPO_GRAPH.items()
        if module.split(".")[0] == importer
        for target in targets
        if target.split(".")[0] in forbidden
    )
    assert not wrong, f"{importer} imports {forbidden}: {wrong}"


def test_the_repository_graph_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    modules = {"benchmarks", "benchmarks.a", "benchmarks.b", "tests.support.polling"}
    source = tmp_path / "probe.py"
    source.write_text(
        "def f():\n    from benchmarks import a\n    from . import b\n"
        "    from tests.support.polling import poll\n"
    )
    assert repo_imports_of(source, modules, "benchmarks.probe") == {
        "benchmarks",
        "benchmarks.a",
        "benchmarks.b",
        "tests.support.polling",
    }
    assert find_cycle({"benchmarks.a": {"benchmarks.b"}, "benchmarks.b": {"benchmarks.a"}})
