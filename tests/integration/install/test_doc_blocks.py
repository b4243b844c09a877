"""Every code block of README.md and docs/*.md, as a user meets it: from the installed wheel,
in a fresh venv, in a directory outside the checkout (issue 21).

Each fenced block says what it is by its language: ``text`` and ``console`` are output (shown,
not run), ``python`` blocks run, ``bash`` blocks of ``pip install`` lines run (marked ``pip``),
other ``bash`` blocks have their ``k8slease`` command lines checked against the installed
command's ``--help`` (an option the docs name must exist), ``yaml``
blocks must parse. A block without a language fails the test: say which it is.

A ``python`` block runs as a script against a fresh embedded API server (``$KUBECONFIG``
points at it; top-level ``await`` is allowed, as in an asyncio REPL), and must end with status 0.
An HTML comment on the line before the fence says otherwise::

    <!-- docs-test: sigterm -->         a service: SIGTERM once it has started (once it leads,
                                        if it leads) must end it as documented (the Lease
                                        released, then the default action: -SIGTERM)
    <!-- docs-test: pytest -->          a test file, run with pytest (the plugin loads itself)
    <!-- docs-test: real -->            needs the real control plane (skipped when not built)
    <!-- docs-test: script; before: CODE -->   CODE runs first (a fragment's context)
    <!-- docs-test: pip -->             a ``bash`` block of ``pip install`` lines: each runs as
                                        written in a fresh venv, against the wheel just built
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, Venv, clean_env, download
from kubernetes import client

# the first block that needs the venv builds the wheel and installs it
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OUTPUT = ("text", "console")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!-- docs-test: (\w+)(?:; before: (.*?))? -->\s*$")

#: names a block leaves to the reader (README's asyncio example calls "your" coroutine), and a
#: log handler that says on stdout when the service has started and when it leads (k8slease's
#: INFO events, which the default logging setup does not print)
RUNNER = textwrap.dedent(
    """
    import ast, asyncio, logging, sys

    async def do_some_work(fencing_token):
        await asyncio.Event().wait()  # runs until cancelled

    class SayStarted(logging.Handler):
        def emit(self, record):
            event = getattr(record, "k8slease_event", "")
            if event in ("jobs.started", "leader.started"):
                print(f"docs-test: {event}", flush=True)

    logging.getLogger("k8slease").setLevel(logging.INFO)
    logging.getLogger("k8slease").addHandler(SayStarted())

    print("docs-test: running", flush=True)
    source = open(sys.argv[1]).read()
    code = compile(source, sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "__main__", "do_some_work": do_some_work}
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    """
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str
    mode: str
    before: str

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks() -> list[Block]:
    found: list[Block] = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            previous = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.search(previous)
            found.append(
                Block(
                    path, line, match.group(1), match.group(2),
                    marker.group(1) if marker else "script",
                    (marker.group(2) or "") if marker else "",
                )
            )  # fmt: skip
    return found


BLOCKS = blocks()
PYTHON = [b for b in BLOCKS if b.language == "python"]
BASH = [b for b in BLOCKS if b.language in ("bash", "console")]


def test_every_block_says_what_it_is() -> None:
    unlabelled = [b.id for b in BLOCKS if b.language not in ("python", "bash", "yaml", *OUTPUT)]
    assert unlabelled == [], "label these fences: python, bash, yaml, or text/console (output)"
    assert len(PYTHON) >= 10


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "yaml"], ids=lambda b: b.id)
def test_yaml_blocks_parse(block: Block) -> None:
    documents = [d for d in yaml.safe_load_all(block.code) if d is not None]
    assert documents, block.code


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_runs_from_the_wheel(
    block: Block,
    demo_venv: Venv,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if block.mode == "real":
        request.getfixturevalue("k8s_real_apiserver")  # skips when the real tier is off
    server: Any = request.getfixturevalue("k8s_embedded_apiserver")
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env({"KUBECONFIG": str(server.kubeconfig), "HOME": str(home)})
    # a fresh HOME, but the machine's build cache: a "real" block must find the control plane
    # built (as a user's second run would), not compile kube-apiserver again
    env.setdefault(
        "XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    )
    env.pop("POD_NAMESPACE", None)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    source = (block.before + "\n" if block.before else "") + block.code
    if block.mode == "pytest":
        test_file = tmp_path / "test_block.py"
        test_file.write_text(source)
        done = subprocess.run(
            # the embedded tier only: where Go is installed the default also builds and starts
            # the real control plane, which its own tests cover
            [str(demo_venv.python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--k8s-server=embedded", str(test_file)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return
    script = tmp_path / "block.py"
    script.write_text(source)
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    process = subprocess.Popen(
        [str(demo_venv.python), str(runner), str(script)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        if block.mode == "sigterm":
            # a service that leads (a LEADER job, an elector) gets its SIGTERM once it leads,
            # and must have released its Lease; one with Jobs once they have started
            leads = "Mode.LEADER" in block.code or "LeaderElector" in block.code
            if leads:
                wait_line(process, "docs-test: leader.started")
            elif "Jobs(" in block.code:
                wait_line(process, "docs-test: jobs.started")
            else:
                # a user's own loop around a TickLock (schedule, asyncio): nothing says it has
                # reached its loop (it reads no Lease before its first tick), so it gets 4 s
                # from the moment the runner starts the block's code: the scenario, not a guess
                wait_line(process, "docs-test: running")
                time.sleep(4)
            with server.api_client() as api:
                coordination = client.CoordinationV1Api(api)
                held = [
                    lease
                    for lease in coordination.list_lease_for_all_namespaces().items
                    if lease.spec.holder_identity
                ]
                assert held or not leads, "a service that leads holds its Lease"
                process.send_signal(signal.SIGTERM)
                _, stderr = process.communicate(timeout=60)
                assert process.returncode == -signal.SIGTERM, stderr
                for lease in held:
                    name, namespace = lease.metadata.name, lease.metadata.namespace
                    now = coordination.read_namespaced_lease(name, namespace)
                    assert not now.spec.holder_identity, f"{namespace}/{name} not released"
            return
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        assert "Traceback" not in stderr, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def wait_line(process: subprocess.Popen[str], line: str, timeout: float = 60) -> None:
    """Read ``process``'s stdout until ``line``; fails if it ends first or after ``timeout``
    (a timer kills the process, which ends the read)."""
    assert process.stdout is not None
    seen: list[str] = []
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        for got in process.stdout:
            seen.append(got.rstrip("\n"))
            if seen[-1] == line:
                return
    finally:
        timer.cancel()
    process.kill()
    _, stderr = process.communicate()
    raise AssertionError(f"no {line!r} within {timeout}s; stdout: {seen}; stderr: {stderr}")


def k8slease_commands(block: Block) -> list[list[str]]:
    """The ``k8slease ...`` / ``python -m k8slease ...`` command lines of a shell block."""
    commands = []
    for raw in block.code.replace("\\\n", " ").splitlines():
        line = raw.strip().removeprefix("$ ")
        for part in re.split(r"\|\||&&|\||;", line.split("#")[0]):
            words = shlex.split(part, posix=True) if part.strip() else []
            if words[:3] == ["python", "-m", "k8slease"]:
                words = ["k8slease", *words[3:]]
            if words[:1] == ["k8slease"] and len(words) > 1 and not words[1].startswith("-"):
                commands.append(words)
    return commands


@pytest.mark.parametrize("block", [b for b in BASH if k8slease_commands(b)], ids=lambda b: b.id)
def test_k8slease_command_lines_use_options_that_exist(block: Block, demo_venv: Venv) -> None:
    for words in k8slease_commands(block):
        done = demo_venv.run("-m", "k8slease", words[1], "--help")
        assert done.returncode == 0, done.stderr
        for word in words[2:]:
            option = word.split("=")[0]
            if option.startswith("--"):
                assert option in done.stdout, f"{' '.join(words)}: no {option} in --help"


PIP = [b for b in BASH if b.mode == "pip"]


@pytest.mark.parametrize("block", PIP, ids=lambda b: b.id)
def test_pip_install_lines_install_what_they_say(
    block: Block, wheel: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    """Each ``pip install`` line, run as written in a fresh venv, installs what its comment
    says: the name ``k8slease`` resolves to the wheel just built (no index: the wheel and the
    wheelhouse are the only sources), and each extra brings the distributions it names."""
    venv = tmp_path / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    shims = tmp_path / "bin"
    shims.mkdir()
    pip = shims / "pip"  # the venv has no pip of its own: drive it from outside, as --python does
    pip.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pip "$@"\n')
    pip.chmod(0o755)
    env = clean_env({
        "PATH": f"{shims}:{os.environ['PATH']}",
        "PIP_PYTHON": str(venv / "bin" / "python"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": f"{wheel.parent} {wheelhouse}",
        "PIP_QUIET": "1",
        "PIP_NO_COMPILE": "1",
    })  # fmt: skip
    # every extra's distributions in the wheelhouse first (fetched once, like the venvs' own)
    spec = f"{wheel}[{','.join(EXTRAS)}]"
    if subprocess.run(["pip", "download", "--dest", str(wheelhouse), spec], env=env,
                      capture_output=True).returncode != 0:  # fmt: skip
        download(wheelhouse, [spec])
    lines = [line for line in block.code.splitlines() if line.strip()]
    assert lines and all(line.startswith("pip install ") for line in lines), block.code
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        installed = Venv(venv).distributions()
        assert "k8slease" in installed and "kubernetes" in installed, line
        for extra in re.findall(r"k8slease\[(\w+)\]", line):
            missing = set(EXTRAS[extra]) - set(installed)
            assert not missing, f"{line}: {sorted(missing)} not installed"
    assert "kopf" in installed and "prometheus-client" in installed, "the last line has them all"


#: Distributions each extra must bring (a subset: the ones that make it that extra).
EXTRAS = {
    "operator": ("kopf", "pyyaml"),
    "testing": ("aiohttp", "jsonschema"),
    "demo": ("kopf", "aiohttp"),
    "metrics": ("prometheus-client",),
    "celery": ("celery",),
}
