"""The shell blocks of README.md and docs/*.md, run as written (issue 21).

Each document's ``shell`` blocks (``docblocks.py``) run in order in one session: ``bash -euo
pipefail`` in a directory outside the checkout, with the wheel's venv first on ``PATH``
(``k8slease``, ``python``, ``kopf``, ``celery``), ``kubectl``, and the ``helm`` that
``make cluster`` builds. Between them, the document's ``yaml`` blocks marked ``file`` are written
as that file, ``values`` are applied (``helm upgrade k8slease charts/k8slease -n k8slease
--reuse-values -f``), ``apply`` ones are ``kubectl apply``-ed; a ``sigterm`` Python block among
them (install.md's app) is started as the app's replica and must end with its Lease released.
Rewritten, and said so here: lines a marker's ``without`` names are not run (its reason says
why), a ``kubectl ... -w`` watch is stopped after 2 s, and ``--kubeconfig PATH`` names the
session's server. What each document's session runs on is in ``SESSIONS``:

- README.md: a fresh copy of the checkout (its files as they are, no ``.venv``): ``make demo``
  installs ``.venv`` from the wheelhouse and runs the whole demo.
- docs/install.md: a real control plane of its own (kube-apiserver and etcd; no node, so no pod
  runs): the chart installed, upgraded with the values blocks, the example groups applied, the
  app's Lease read, the example app's release, the plain manifests, the uninstall.
- docs/testing.md: ``k8slease apiserver`` started from the wheel, as the document says.
- docs/operator.md: a real control plane of its own with the CRD: the four operator command
  lines as services, then the resource applied (strict field validation: the embedded server
  serves no OpenAPI document for ``kubectl apply`` to validate with).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.install.conftest import REPO, Venv, clean_env, download
from tests.integration.install.docblocks import BLOCKS, RUNNER, Block, wait_line


@dataclass(frozen=True)
class Session:
    server: str  # "none", "embedded" (a fresh one), "apiserver" (the wheel's), "real" (own)
    copy: tuple[str, ...] = ()  # checkout paths the session's directory gets ("." = all)
    setup: str = ""  # shell run first: the test's own set-up, not a block of the document


SESSIONS = {
    "README.md": Session("none", copy=(".",)),
    "install.md": Session("real", copy=("charts", "manifests")),
    "testing.md": Session("apiserver", copy=("charts",)),
    "operator.md": Session(
        "real",
        setup="k8slease operator --print-crd | kubectl apply -f -\n"
        "kubectl wait --for condition=established crd/scheduledjobgroups.k8slease.io",
    ),
}
RUN_IN_SESSION = {"shell", "services", "file", "values", "apply"}


def session_blocks(name: str) -> list[Block]:
    return [
        b
        for b in BLOCKS
        if b.path.name == name and (b.mode in RUN_IN_SESSION or (name, b.mode) == SERVICE)
    ]


#: the one Python block a session starts as a service: install.md's app, whose Lease it reads
SERVICE = ("install.md", "sigterm")


def script(block: Block) -> str:
    """``block`` as its session runs it (see the module's docstring)."""
    without = block.keys.get("without")
    lines = []
    for line in block.code.replace("\\\n", " ").splitlines():
        if without and line.strip().startswith(without):
            lines.append(f": not run: {block.keys['reason']!r}")
        elif line.rstrip().endswith(" -w"):
            lines.append(f"timeout 2 {line} || test $? -eq 124")
        else:
            lines.append(line.replace("--kubeconfig PATH", '--kubeconfig "$KUBECONFIG"'))
    assert not without or any(line.startswith(": not run") for line in lines), without
    return "\n".join([block.before, *lines])


def copy_checkout(paths: tuple[str, ...], into: Path) -> None:
    """The checkout's files (tracked or new, as they are now, not ignored ones) under ``paths``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *paths],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


@contextmanager
def server_for(
    name: str, request: pytest.FixtureRequest, demo_venv: Venv, tmp_path: Path
) -> Iterator[Path | None]:
    """The kubeconfig of the server the document ``name`` runs on (None: no server)."""
    kind = SESSIONS[name].server
    if kind == "none":
        yield None
    elif kind == "embedded":
        yield request.getfixturevalue("k8s_embedded_apiserver").kubeconfig
    elif kind == "real":
        request.getfixturevalue("k8s_real_apiserver")  # skips when the real tier is off
        from k8slease.testing import ControlPlane

        with ControlPlane() as plane:  # its own: install.md deletes the CRD at the end
            yield Path(plane.kubeconfig)
    else:
        path = tmp_path / "apiserver.kubeconfig"
        process = subprocess.Popen(
            [demo_venv.bin / "k8slease", "apiserver", "--kubeconfig", path],
            cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_line(process, "serving ")
            yield path
        finally:
            process.terminate()
            process.wait(timeout=30)


def helm_dir() -> Path:
    from k8slease.testing.cluster.build import cached_node_binaries

    binaries = cached_node_binaries()
    if binaries is None:
        pytest.skip("helm is not built: make cluster-binaries builds it")
    return Path(binaries["helm"]).parent


def run_session(
    name: str, kubeconfig: Path | None, demo_venv: Venv, wheelhouse: Path, tmp_path: Path
) -> None:
    """Every block of the document ``name`` its session runs, in order (the module's docstring)."""
    session = SESSIONS[name]
    session_dir = tmp_path / "work"
    session_dir.mkdir()
    blocks = session_blocks(name)
    assert any(b.mode == "shell" or b.mode == "apply" for b in blocks), name
    copy_checkout(session.copy, session_dir)
    home = tmp_path / "home"
    home.mkdir()
    # README's quick start needs only Python and make: the wheel's venv is not on its PATH
    tools = [] if name == "README.md" else [demo_venv.bin]
    tools += [helm_dir()] if name == "install.md" else []
    env = clean_env({"HOME": str(home), "PATH": ":".join(map(str, [*tools, clean_env()["PATH"]]))})
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    if name == "README.md":
        # `make install` in the copy: pip from the wheelhouse only (filled once, like the venvs')
        env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse), PIP_NO_COMPILE="1")
        env.pop("KUBECONFIG", None)
    ran: list[str] = []
    app: subprocess.Popen[str] | None = None
    downloaded: set[str] = set()

    def run(code: str, what: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=session_dir, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        missing = done.returncode and "No matching distribution" in done.stderr
        if missing and name == "README.md" and what not in downloaded:
            # once: what `make install` needs, into the wheelhouse
            downloaded.add(what)
            download(wheelhouse, [f"{REPO}[dev]", "hatchling>=1.21", "editables~=0.3"])
            return run(code, what)
        output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == 0, f"{what}:\n{code}\n{output}"
        return done

    try:
        if session.setup:
            run(session.setup, "the session's set-up")
        for block in blocks:
            if block.mode == "file":
                (session_dir / block.keys["name"]).write_text(block.code)
            elif block.mode in ("values", "apply"):
                path = tmp_path / f"{block.line}.yaml"
                path.write_text(block.code)
                command = (
                    f"helm upgrade k8slease charts/k8slease -n k8slease --reuse-values -f {path}"
                    if block.mode == "values"
                    else f"kubectl apply -f {path}"
                )
                run(f"{block.before}\n{command}", block.id)
            elif block.mode == "services":
                if block.before:
                    run(block.before, f"{block.id} (before)")
                for line in service_lines(block):
                    run_service(line, block.keys["ready"].split(" | "), session_dir, env)
            elif block.mode == "sigterm":
                app = start_app(block, demo_venv, env, tmp_path)
            else:
                run(script(block), block.id)
            ran.append(block.id)
        if app is not None:
            stop_app(app, kubeconfig)
    finally:
        if app is not None and app.poll() is None:
            app.kill()
            app.communicate()
    assert ran == [b.id for b in blocks]


def service_lines(block: Block) -> list[str]:
    lines = [line.strip() for line in block.code.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run_service(line: str, ready: list[str], cwd: Path, env: dict[str, str]) -> None:
    """``line`` runs until stopped: once it prints one of ``ready``, SIGTERM must end it."""
    process = subprocess.Popen(
        ["bash", "-c", f"exec {line}"], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen: list[str] = []
    timer = threading.Timer(60, process.kill)
    timer.start()
    try:
        for got in process.stdout:
            seen.append(got.rstrip("\n"))
            if any(text in seen[-1] for text in ready):
                break
        else:
            raise AssertionError(f"{line}: ended ({process.wait()}) before {ready}: {seen}")
    finally:
        timer.cancel()
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    output = "\n".join([*seen, rest])
    assert process.returncode in (0, -signal.SIGTERM), f"{line}: {process.returncode}\n{output}"
    assert "Traceback" not in output, f"{line}:\n{output}"


def start_app(block: Block, venv: Venv, env: dict[str, str], tmp_path: Path) -> Any:
    """install.md's app, as one replica in the namespace the document uses, once it leads."""
    source = tmp_path / "app.py"
    source.write_text(block.code)
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    process = subprocess.Popen(
        [str(venv.python), str(runner), str(source)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env, "POD_NAMESPACE": "k8slease", "POD_NAME": "billing-app-6d5f9c7b8-x2k4q"},
    )  # fmt: skip
    wait_line(process, "docs-test: leader.started")
    return process


def stop_app(app: subprocess.Popen[str], kubeconfig: Path | None) -> None:
    """SIGTERM: the app releases its Lease, then dies of the signal (the default action)."""
    app.send_signal(signal.SIGTERM)
    _, stderr = app.communicate(timeout=60)
    assert app.returncode == -signal.SIGTERM, stderr
    holder = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "-n", "k8slease", "get", "lease", "billing",
         "-o", "jsonpath={.spec.holderIdentity}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert holder.returncode == 0 and holder.stdout == "", holder
