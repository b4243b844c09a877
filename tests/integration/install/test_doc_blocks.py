"""Every code block of README.md and docs/*.md, as a user meets it: from the installed wheel,
in a fresh venv, in a directory outside the checkout (issue 21).

What each block is, and the marker that says so, is in ``docblocks.py``: a block is run by a
test (``python`` blocks here, ``pip`` blocks here, ``shell`` blocks and the ``yaml`` files and
values they use in ``test_doc_shell.py``), or it is marked as output or as not run, with the
reason. ``test_every_block_is_run_or_marked`` fails on any other block. The blocks marked
``help`` (and every shell block) have their command lines checked: each ``--option`` must be
in the command's ``--help``, each ``make`` target must exist.

A ``python`` block runs as a script against a fresh embedded API server (``$KUBECONFIG``
points at it; top-level ``await`` is allowed, as in an asyncio REPL), and must end with status 0.
``sigterm``: a service: SIGTERM once it has started (once it leads, if it leads) must end it as
documented (the Lease released, then the default action: -SIGTERM). ``pytest``: a test file, run
with pytest (the plugin loads itself). ``real``: needs the real control plane (skipped when not
built). ``script; before: CODE``: CODE runs first (a fragment's context).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.integration.install.conftest import REPO, Venv, clean_env, download
from tests.integration.install.docblocks import (
    BLOCKS,
    EXECUTED,
    RUNNER,
    Block,
    command_lines,
    parse_marker,
    problems,
    wait_line,
)

# the first block that needs the venv builds the wheel and installs it
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PYTHON = [b for b in BLOCKS if b.language == "python"]


def test_every_block_is_run_or_marked() -> None:
    """A block no test runs must say so, with the reason: nothing can regress into an untested
    block, and a wrong marker (a mode no test knows, a reason missing) fails here."""
    found = [problem for block in BLOCKS for problem in problems(block)]
    assert found == [], "\n".join(found)
    assert len(PYTHON) >= 10


def test_the_marker_rules_refuse_what_is_neither_run_nor_explained() -> None:
    """The check above can fail: each kind of unmarked or half-marked block is refused."""

    def block(language: str, marker: str) -> Block:
        mode, keys = parse_marker(marker)
        return Block(REPO / "X.md", 1, language, "true\n", mode or "script", keys)

    assert problems(block("bash", "")), "a bash block with no marker"
    assert problems(block("text", "")), "a text block with no marker"
    assert problems(block("", "<!-- docs-test: output -->")), "a fence with no language"
    assert problems(block("bash", "<!-- docs-test: not-run -->")), "no reason"
    assert problems(block("bash", "<!-- docs-test: help -->")), "no reason"
    assert problems(block("bash", "<!-- docs-test: output -->")), "output is text or console"
    assert problems(block("bash", "<!-- docs-test: shell; without: make -->")), "no reason"
    assert problems(block("yaml", "<!-- docs-test: file -->")), "a file needs a name"
    assert problems(block("yaml", "<!-- docs-test: sigterm -->")), "no test runs that"
    assert problems(block("bash", "<!-- docs-test: shell; because: x -->")), "unknown key"
    assert not problems(block("python", ""))
    assert not problems(block("text", "<!-- docs-test: output -->"))
    assert not problems(block("bash", "<!-- docs-test: help; reason: r -->"))
    assert not problems(block("bash", "<!-- docs-test: shell; without: x; reason: r -->"))
    before = parse_marker("<!-- docs-test: script; before: a = 1; b = 2 -->")
    assert before == ("script", {"before": "a = 1; b = 2", "_marked": "yes"})


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
                # k8slease releases on SIGTERM where it handles the signal (an elector, Jobs).
                # A user's own loop around a TickLock installs no handler: a SIGTERM in the
                # middle of a run ends the run there and its lock expires after
                # lock_at_most_for (docs/integrations.md says so; the examples' graceful stop is
                # tested in test_tick_lock_processes.py). A make test run of 2026-12-04 sent it
                # during the asyncio recipe's 1 s run.
                handled = leads or "Jobs(" in block.code
                for lease in held if handled else []:
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


def k8slease_commands(block: Block) -> list[list[str]]:
    """The ``k8slease ...`` / ``python -m k8slease ...`` command lines of a shell block."""
    commands = []
    for words in command_lines(block.code):
        if words[:3] == ["python", "-m", "k8slease"]:
            words = ["k8slease", *words[3:]]
        if words[:1] == ["k8slease"] and len(words) > 1 and not words[1].startswith("-"):
            commands.append(words)
    return commands


BASH = [b for b in BLOCKS if b.language in ("bash", "console") or b.mode == "help"]


@pytest.mark.parametrize("block", [b for b in BASH if k8slease_commands(b)], ids=lambda b: b.id)
def test_k8slease_command_lines_use_options_that_exist(block: Block, demo_venv: Venv) -> None:
    for words in k8slease_commands(block):
        done = demo_venv.run("-m", "k8slease", words[1], "--help")
        assert done.returncode == 0, done.stderr
        for word in words[2:]:
            option = word.split("=")[0]
            if option.startswith("--"):
                assert option in done.stdout, f"{' '.join(words)}: no {option} in --help"


#: options that take the next word as their value
VALUED = {"-n", "--namespace", "--kubeconfig", "-f", "-A", "--app", "-S", "-m"}


def positional(words: list[str]) -> list[str]:
    """The words that are neither options nor option values: a command's subcommands."""
    values = {i + 1 for i, w in enumerate(words) if w in VALUED}
    return [w for i, w in enumerate(words) if not w.startswith("-") and i not in values]


def help_command(words: list[str], venv: Venv) -> tuple[list[str], list[str]] | None:
    """How to ask the command ``words`` for its help, and the words whose ``--options`` must
    be in it; None for a command checked elsewhere (k8slease, pip) or with no help to ask."""
    while words[:1] in (["nice"], ["timeout"]):
        words = words[3:] if words[1:2] == ["-n"] else words[2:]
    program, rest = words[0], words[1:]
    if program in ("k8slease", "pip", "docker") or words[:3] == ["python", "-m", "k8slease"]:
        return None
    if program == ".venv/bin/python" and rest[:1] == ["-m"]:
        return [sys.executable, "-m", rest[1], "--help"], rest[2:]
    if program == ".venv/bin/pytest":
        return [sys.executable, "-m", "pytest", "--help"], rest
    if program == "make":
        return ["make", "-n", "-C", str(REPO), *rest], []
    if program == "kubectl":
        sub = positional(rest)[:2]
        sub = sub if sub[:1] == ["rollout"] else sub[:1]
        return ["kubectl", *sub, "--help"], rest
    if program in ("kopf", "celery"):
        sub = positional(rest)[:1]
        return [str(venv.bin / program), *sub, "--help"], rest
    return None


HELP = [b for b in BLOCKS if b.mode == "help"]


@pytest.mark.parametrize("block", HELP, ids=lambda b: b.id)
def test_lines_not_run_use_commands_and_options_that_exist(block: Block, demo_venv: Venv) -> None:
    """A block marked ``help`` is not run (its reason says why), but each command's options are
    in its ``--help`` and each ``make`` target exists (``make -n``): a renamed option or target
    fails here."""
    checked = 0
    helps: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}
    for words in command_lines(block.code):
        asked = help_command(words, demo_venv)
        if asked is None:
            continue
        argv, options = asked
        if tuple(argv) not in helps:  # one --help per command, however many lines use it
            helps[tuple(argv)] = subprocess.run(
                argv, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120
            )
        done = helps[tuple(argv)]
        assert done.returncode == 0, f"{' '.join(words)}: {' '.join(argv)}\n{done.stderr}"
        # help, not a run: a command that ignores --help would do its work here (it happened)
        assert argv[0] == "make" or "usage" in done.stdout.lower(), f"{argv}: {done.stdout[:300]}"
        checked += 1
        for word in options:
            option = word.split("=")[0]
            if option.startswith("--"):
                assert option in done.stdout, f"{' '.join(words)}: no {option} in its --help"
    assert checked or k8slease_commands(block), f"{block.id}: no command line checked"


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


def test_the_counts_in_docs_testing_md_are_current() -> None:
    """docs/testing.md says how many blocks run and how many are marked; it stays true."""
    text = " ".join((REPO / "docs" / "testing.md").read_text().split())

    def count(*languages: str, mode: str | None = None) -> int:
        return sum(
            1
            for b in BLOCKS
            if (not languages or b.language in languages) and (mode is None or b.mode == mode)
        )

    run = [b for b in BLOCKS if (b.language, b.mode) in EXECUTED]
    said = (
        f"Of the {len(BLOCKS)} blocks (2026-12-01): {len(run)} run ({count('python')} `python`, "
        f"{count(mode='pip')} `pip`, {count(mode='shell')} `shell`, {count(mode='services')} "
        f"`services`, {count('yaml') - count('yaml', mode='not-run')} `yaml`), "
        f"{count(mode='output')} are output, {count(mode='help')} `help` (their options and "
        f"targets checked), {count(mode='not-run')} `not-run`"
    )
    assert said in text, f"docs/testing.md should say: {said}"
