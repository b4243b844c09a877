"""The floors CI tests (.ci/floor-constraints.txt, ``make test-floor``) are the declared ones."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*(.*)$")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_floors() -> dict[str, str]:
    """``name -> floor`` of every runtime requirement with a ``>=`` bound (extras but dev)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra, items in project.get("optional-dependencies", {}).items():
        if extra != "dev":
            requirements += items
    floors: dict[str, str] = {}
    for requirement in requirements:
        match = REQUIREMENT.match(requirement.split(";")[0])
        assert match, requirement
        name, spec = match.groups()
        if name.startswith("k8slease"):
            continue  # an extra that includes other extras
        bound = re.search(r">=\s*([0-9][^,\s]*)", spec)
        assert bound, f"{requirement}: every runtime dependency declares a tested floor (>=)"
        floors[normalise(name)] = bound.group(1)
    return floors


def pinned_floors() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / ".ci" / "floor-constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[normalise(name)] = version.strip()
    return pins


def test_every_declared_floor_is_pinned_for_the_floor_run() -> None:
    declared = {name: Version(v) for name, v in declared_floors().items()}
    pinned = {name: Version(v) for name, v in pinned_floors().items()}
    assert declared == pinned


def test_the_kubernetes_floor_has_what_the_code_needs() -> None:
    # The transport calls ApiClient.param_serialize, which kubernetes 37 is the first to have.
    assert int(declared_floors()["kubernetes"].split(".")[0]) >= 37
