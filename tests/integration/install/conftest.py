"""A wheel of the checkout installed into fresh virtual environments outside it, as a user would.

One wheel per session, built from the checkout. Its dependencies come from the package index
into ``build/install-test/wheelhouse`` (git-ignored, kept between sessions): each venv installs
from that wheelhouse with ``--no-index``, and only when that fails (first run, or a changed
requirement) is the index asked, once, for what is missing. The venvs are made without pip of
their own (the checkout's pip installs into them with ``--python``) and without byte-compiling,
which keeps each install to a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILD = REPO / "build" / "install-test"


def _run(args: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=300, **kwargs
    )  # type: ignore[call-overload]
    return result


def _pip(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args])


@dataclass(frozen=True)
class Venv:
    """A fresh virtual environment with the wheel installed."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def distributions(self) -> dict[str, list[str]]:
        """Installed distribution -> the names of its requirements (extras excluded)."""
        script = (
            "import json, re\n"
            "from importlib import metadata\n"
            "out = {}\n"
            "for d in metadata.distributions():\n"
            "    reqs = [r for r in (d.requires or []) if 'extra ==' not in r]\n"
            "    norm = lambda n: re.sub(r'[-_.]+', '-', n).lower()\n"
            "    out[norm(d.metadata['Name'])] = [norm(re.split(r'[ ;<>=!~\\[(]', r)[0])"
            " for r in reqs]\n"
            "print(json.dumps(out))\n"
        )
        result = self.run("-c", script)
        assert result.returncode == 0, result.stderr
        found: dict[str, list[str]] = json.loads(result.stdout)
        return found

    def run(
        self, *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        environ = clean_env()
        environ.update(env or {})
        return _run([self.python, *args], cwd=cwd or self.root, env=environ)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a user's shell: nothing that points back into the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def wheel() -> Path:
    """The checkout built as a wheel (once per session, and per xdist worker: each session
    removes its directory before it builds, so two workers sharing one removed the wheel the
    other was installing, a `make test` failure of 2026-12-03)."""
    dist = BUILD / "dist" / os.environ.get("PYTEST_XDIST_WORKER", "main")
    shutil.rmtree(dist, ignore_errors=True)
    result = _pip("wheel", "--no-deps", "--quiet", "--wheel-dir", dist, REPO)
    assert result.returncode == 0, result.stderr
    (built,) = dist.glob("k8slease-*.whl")
    return built


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """Where the distributions the venvs install are kept (filled on demand)."""
    house = BUILD / "wheelhouse"
    house.mkdir(parents=True, exist_ok=True)
    return house


def download(wheelhouse: Path, spec: list[str]) -> None:
    """Fetch what ``spec`` needs from the package index into ``wheelhouse``."""
    result = _pip("download", "--quiet", "--dest", wheelhouse, *spec)
    if result.returncode != 0:
        if "NewConnectionError" in result.stderr or "Could not find a version" in result.stderr:
            pytest.skip(f"the package index is not reachable: {result.stderr[-300:]}")
        raise AssertionError(result.stderr)
    for stale in wheelhouse.glob("k8slease-*"):
        stale.unlink()  # always install the wheel just built, never a copy


def install(
    wheelhouse: Path, spec: list[str], *, python: Path | None = None, target: Path | None = None
) -> None:
    """``pip install`` ``spec`` from the wheelhouse only, downloading first if it lacks some.

    Into the venv of ``python``, or into the directory ``target``.
    """
    where: list[str | Path] = ["--python", python] if python else []
    args: list[str | Path] = ["install", "--quiet", "--no-compile", "--no-index"]
    args += ["--find-links", wheelhouse, *(["--target", target] if target else [])]
    result = _pip(*where, *args, *spec)
    if result.returncode != 0:
        download(wheelhouse, spec)
        result = _pip(*where, *args, *spec)
    assert result.returncode == 0, result.stderr


def make_venv(
    root: Path, wheel: Path, wheelhouse: Path, *, extras: str = "", others: tuple[str, ...] = ()
) -> Venv:
    """A new venv at ``root`` with ``wheel[extras]`` (and ``others``) installed, no index."""
    result = _run([sys.executable, "-m", "venv", "--without-pip", root])
    assert result.returncode == 0, result.stderr
    venv = Venv(root)
    spec = [f"{wheel}[{extras}]" if extras else str(wheel), *others]
    install(wheelhouse, spec, python=venv.python)
    return venv


@pytest.fixture(scope="session")
def core_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, wheelhouse: Path) -> Venv:
    """``pip install k8slease``: the wheel without extras."""
    return make_venv(tmp_path_factory.mktemp("core") / "venv", wheel, wheelhouse)


@pytest.fixture(scope="session")
def bare_pytest(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """pytest alone in a directory, to put on a core venv's path (the venv stays core)."""
    target = tmp_path_factory.mktemp("pytest-only")
    install(wheelhouse, ["pytest"], target=target)
    return target


@pytest.fixture(scope="session")
def demo_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, wheelhouse: Path) -> Venv:
    """``pip install 'k8slease[demo,celery]' pytest schedule``: what the demo and the docs' blocks
    need."""
    root = tmp_path_factory.mktemp("demo") / "venv"
    # celery, schedule: docs/integrations.md shows their recipes, which run as the other blocks
    return make_venv(root, wheel, wheelhouse, extras="demo,celery", others=("pytest", "schedule"))
