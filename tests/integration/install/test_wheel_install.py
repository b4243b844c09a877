"""The wheel, installed into fresh venvs outside the checkout, does what the README promises:
a light core, every README code block running as written, and the demo running from the install.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer
from tests.integration.install.conftest import REPO, Venv, clean_env

README = (REPO / "README.md").read_text()
NS = "readme"
#: What only the extras bring: none of it belongs in a core install.
NOT_IN_CORE = {"kopf", "jsonschema", "pytest", "prometheus-client", "click", "iso8601"}


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.DOTALL | re.MULTILINE)


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer() as srv:
        api = srv.api_client()
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        api.close()
        yield srv


def user_env(server: APIServer) -> dict[str, str]:
    """A developer's shell pointed at the cluster (the embedded server)."""
    return clean_env({"KUBECONFIG": str(server.kubeconfig), "POD_NAMESPACE": NS})


def test_core_install_is_light(core_venv: Venv) -> None:
    dists = core_venv.distributions()
    assert "k8slease" in dists
    assert not NOT_IN_CORE & set(dists), sorted(NOT_IN_CORE & set(dists))
    # kubernetes>=37 itself requires aiohttp; nothing of k8slease's own does.
    needing_aiohttp = sorted(name for name, reqs in dists.items() if "aiohttp" in reqs)
    assert set(needing_aiohttp) <= {"kubernetes", "aiohttp-retry"}, needing_aiohttp
    assert sorted(dists["k8slease"]) == ["apscheduler", "kubernetes", "structlog"]
    print(f"core install: {len(dists)} distributions (k8slease included): {sorted(dists)}")
    assert len(dists) <= 32


def test_core_imports_without_the_extras(core_venv: Venv, tmp_path: Path) -> None:
    script = (
        "import sys, k8slease\n"
        "k8slease.LeaderElector, k8slease.Jobs, k8slease.JobContext, k8slease.wrap\n"
        "import k8slease.cli.status, k8slease.testing\n"
        "assert k8slease.__file__.startswith(sys.prefix), k8slease.__file__\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(loaded & {'kopf', 'aiohttp', 'jsonschema', 'yaml', 'pydantic'}))\n"
    )
    result = core_venv.run("-c", script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "kopf" not in result.stdout and "aiohttp" not in result.stdout
    assert "jsonschema" not in result.stdout


def test_core_cli_names_the_extra_a_command_needs(core_venv: Venv, tmp_path: Path) -> None:
    k8slease = str(core_venv.bin / "k8slease")
    version = subprocess.run([k8slease, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout == "k8slease 0.1.0\n"
    # (`demo` takes the same path, with the `demo` extra: one import of k8slease costs seconds)
    for command, extra in (("operator", "operator"), ("apiserver", "testing")):
        result = subprocess.run(
            [k8slease, command], capture_output=True, text=True, cwd=tmp_path, env=clean_env()
        )
        assert result.returncode == 2, (command, result.stderr)
        assert f"pip install 'k8slease[{extra}]'" in result.stderr
        assert "Traceback" not in result.stderr


def test_readme_install_lines_name_real_extras() -> None:
    (install,) = [b for b in blocks("bash") if "pip install k8slease" in b]
    named = set(re.findall(r"pip install 'k8slease\[(\w+)\]'", install))
    extras = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    assert named and named <= extras, named - extras
    assert {"operator", "testing", "demo", "metrics"} <= named


def test_readme_elector_block_runs_as_written_on_the_core(
    core_venv: Venv, server: APIServer, tmp_path: Path
) -> None:
    (block,) = [b for b in blocks("python") if "with LeaderElector(" in b and "def test_" not in b]
    script = tmp_path / "elector.py"
    script.write_text(block)
    result = core_venv.run(script, cwd=tmp_path, env=user_env(server))
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^leader: \S+", result.stdout, re.MULTILINE), result.stdout


def test_readme_jobs_block_runs_as_written_on_the_core(
    core_venv: Venv, server: APIServer, tmp_path: Path
) -> None:
    (block,) = [b for b in blocks("python") if "jobs.run()" in b]
    script = tmp_path / "app.py"
    script.write_text(block)
    api = server.api_client()
    leases = LeaseTransport(api, NS)
    proc = subprocess.Popen(
        [str(core_venv.python), str(script)],
        cwd=tmp_path,
        env=user_env(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        holder = ""
        deadline = time.monotonic() + 30
        while not holder and time.monotonic() < deadline and proc.poll() is None:
            # a watch without resourceVersion starts with the Lease as it is (if it exists);
            # reopened every 2 s to see whether the app still runs
            for event in leases.watch(name="billing", timeout_seconds=2):
                holder = event.lease.get("spec", {}).get("holderIdentity") or ""
                if holder:
                    break
        assert holder, "the app never took its group's leader Lease"
        proc.send_signal(signal.SIGTERM)  # what Kubernetes sends on a rollout
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # released, then ended by SIGTERM's default action, as the process would have without us
    assert proc.returncode == -signal.SIGTERM, out
    released = leases.get("billing") or {}
    assert not released.get("spec", {}).get("holderIdentity"), "SIGTERM releases the Lease"
    api.close()


def test_readme_pytest_block_passes_outside_the_checkout(demo_venv: Venv, tmp_path: Path) -> None:
    (block,) = [b for b in blocks("python") if "def test_" in b]
    (tmp_path / "test_my_app.py").write_text(block)
    result = demo_venv.run(
        "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_my_app.py", cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # once per API server: [embedded] always; [real] too where Go or cached binaries exist
    assert re.search(r"test_my_app\.py::\w+\[embedded\] PASSED", result.stdout), result.stdout
    assert "FAILED" not in result.stdout and "ERROR" not in result.stdout


def test_pytest_plugin_in_a_core_install_says_which_extra_is_missing(
    core_venv: Venv, bare_pytest: Path, tmp_path: Path
) -> None:
    """pytest loads the plugin wherever k8slease is installed: it must not break a core install."""
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    (tmp_path / "test_fixture.py").write_text("def test_uses(k8s_api_client):\n    pass\n")
    env = {"PYTHONPATH": str(bare_pytest)}
    args = ("-m", "pytest", "-q", "-p", "no:cacheprovider")
    plain = core_venv.run(*args, "test_plain.py", cwd=tmp_path, env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr  # the plugin loads, harmless
    used = core_venv.run(*args, "test_fixture.py", cwd=tmp_path, env=env)
    assert used.returncode != 0
    assert "pip install 'k8slease[testing]'" in used.stdout + used.stderr


def test_demo_runs_from_the_installed_wheel(demo_venv: Venv, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(demo_venv.bin / "k8slease"), "demo", "--quick", "--no-kubectl"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every invoice tick ran exactly once" in result.stdout
    assert re.search(r"took over [0-9.]+ s after SIGKILL", result.stdout)
