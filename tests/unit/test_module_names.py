"""Each module name means one thing across the package (issue 24).

Two modules of one name in different wings (``election/runner`` and ``jobs/runner``) make a
reader, a traceback and a logger name ambiguous. The only repeats allowed are the parallel
tiers of ``k8slease/testing/`` (the real control plane and the single-node cluster), where a
name says the same role of each tier: its build, its versions, its command, its kubeconfig.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "k8slease"
#: the roles each tier of testing/ has, under one name in each
TIER_ROLES = {"build.py", "versions.py", "serve.py", "kubeconfig.py"}


def _repeated(root: Path) -> dict[str, list[str]]:
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if path.name in {"__init__.py", "__main__.py"}:
            continue
        places[path.name].append(str(path.relative_to(root)))
    return {name: where for name, where in places.items() if len(where) > 1}


def _allowed(name: str, where: list[str]) -> bool:
    return name in TIER_ROLES and all(place.startswith("testing/") for place in where)


def test_no_module_name_means_two_things() -> None:
    clashes = {n: w for n, w in _repeated(PACKAGE).items() if not _allowed(n, w)}
    assert not clashes, f"module names used in several wings: {clashes}"


def test_the_check_finds_a_clash(tmp_path: Path) -> None:
    for place in ("election/runner.py", "jobs/runner.py", "testing/a/serve.py", "testing/serve.py"):
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / place).write_text("")
    repeated = _repeated(tmp_path)
    assert set(repeated) == {"runner.py", "serve.py"}
    assert not _allowed("runner.py", repeated["runner.py"])
    assert _allowed("serve.py", repeated["serve.py"])
