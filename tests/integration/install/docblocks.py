"""The fenced code blocks of README.md and docs/*.md, and what each one is (issue 21).

A block says how it is tested by an HTML comment on the line right before its fence::

    <!-- docs-test: MODE; KEY: VALUE; KEY: VALUE -->

Without a comment, a ``python`` block is a ``script``. Every other block needs one, and a block
that no test executes needs a ``reason`` too (``test_every_block_is_run_or_marked`` fails
otherwise), so a new block can only be added run or explained. The modes, by language:

========== ============ ==================================================================
language   mode         what the tests do with it
========== ============ ==================================================================
python     script       run as a script on a fresh embedded API server (``$KUBECONFIG``)
python     sigterm      a service: SIGTERM once it has started must release its Lease
python     pytest       a test file, run with pytest
python     real         a script that needs the real control plane
bash       pip          each ``pip install`` line run as written in a fresh venv
bash       shell        run (``bash -euo pipefail``) in the document's shell session
                        (``test_doc_shell.py``): every shell block of one document, in order
bash       services     each command line is a service, started in the document's session: it
                        must print a line holding one of ``ready``'s ``|``-separated texts,
                        then end on SIGTERM (status 0 or -SIGTERM) within 60 s, no traceback
yaml       file         written as the file ``name`` into that session's directory
yaml       values       Helm values: applied in the session with ``helm upgrade`` (install.md)
yaml       apply        a resource: ``kubectl apply``-ed in the session, and accepted
any        output       what a command prints (``text`` or ``console`` only): not run
any        help         not run (``reason``); every command line's ``--options`` are checked
                        against the command's ``--help``, every ``make`` target with ``make -n``
any        not-run      neither run nor checked (``reason``: a diagram, a fragment, ...);
                        a ``yaml`` one must still parse
========== ============ ==================================================================

Keys: ``before`` (code run first: a fragment's context, in Python or in the shell),
``reason`` (why a block or part of it is not run), ``without`` (``shell``: lines starting with
this are not run, and ``reason`` says why), ``name`` (``file``: the file's name), ``ready``
(``services``: what a service prints once it runs).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!-- docs-test: (\S+?)((?:;.*?)?) -->\s*$")
KEY = re.compile(r";\s*(before|reason|without|name|ready):\s*")

#: (language, mode) pairs a test executes
EXECUTED = {
    ("python", "script"),
    ("python", "sigterm"),
    ("python", "pytest"),
    ("python", "real"),
    ("bash", "pip"),
    ("bash", "shell"),
    ("bash", "services"),
    ("yaml", "file"),
    ("yaml", "values"),
    ("yaml", "apply"),
}
#: modes of a block no test executes: each needs a reason, but ``output``, which is its reason
NOT_EXECUTED = {"output", "help", "not-run"}
OUTPUT_LANGUAGES = ("text", "console")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str
    mode: str
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def before(self) -> str:
        return self.keys.get("before", "")

    @property
    def explicit(self) -> bool:
        """Whether a marker names the mode (only a ``python`` block may go without one)."""
        return self.keys.get("_marked") == "yes"


def parse_marker(comment: str) -> tuple[str, dict[str, str]]:
    """``MODE; KEY: VALUE; ...`` -> (mode, keys). A ``before`` value may hold ``;``."""
    match = MARKER.search(comment)
    if match is None:
        return "", {}
    parts = KEY.split(match.group(2))
    keys = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    if parts[0].strip():
        keys["_unparsed"] = parts[0].strip()
    keys["_marked"] = "yes"
    return match.group(1), keys


def blocks() -> list[Block]:
    found: list[Block] = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            previous = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            mode, keys = parse_marker(previous)
            language, code = match.group(1), match.group(2)
            found.append(Block(path, line, language, code, mode or "script", keys))
    return found


def problems(block: Block) -> list[str]:
    """Why ``block`` is neither executed by a test nor marked as not run with a reason."""
    where = f"{block.id} ({block.language or 'no language'}, {block.mode})"
    if not block.language:
        return [f"{where}: label the fence (python, bash, yaml, text or console)"]
    if "_unparsed" in block.keys:
        return [f"{where}: marker text not understood: {block.keys['_unparsed']!r}"]
    if block.language != "python" and not block.explicit:
        return [f"{where}: no <!-- docs-test: ... --> marker: run it or say why not"]
    if block.mode in NOT_EXECUTED:
        if block.mode == "output" and block.language not in OUTPUT_LANGUAGES:
            return [f"{where}: output is a text or console block"]
        if block.mode != "output" and not block.keys.get("reason"):
            return [f"{where}: a block no test runs needs a reason"]
        return []
    if (block.language, block.mode) not in EXECUTED:
        return [f"{where}: no test executes this language in this mode"]
    if "without" in block.keys and not block.keys.get("reason"):
        return [f"{where}: lines left out ('without') need a reason"]
    if block.mode == "file" and not block.keys.get("name"):
        return [f"{where}: a file block needs a name"]
    if block.mode == "services" and not block.keys.get("ready"):
        return [f"{where}: a services block needs the text that says a service is ready"]
    return []


def command_lines(code: str) -> list[list[str]]:
    """Each command of a shell block, split into words (prompts, comments, pipes and
    continuation lines handled; ``[optional]`` synopsis words dropped)."""
    commands = []
    for raw in code.replace("\\\n", " ").splitlines():
        line = raw.strip().removeprefix("$ ")
        if line.startswith("#"):
            continue
        for part in re.split(r"\|\||&&|\||;", line.split(" #")[0]):
            try:
                words = shlex.split(part, posix=True)
            except ValueError:
                words = part.split()
            words = [w.strip("[]") for w in words]
            if words:
                commands.append(words)
    return commands


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


def wait_line(process: subprocess.Popen[str], line: str, timeout: float = 60) -> str:
    """Read ``process``'s stdout until a line that starts with ``line``, and return it; fails if
    the process ends first or after ``timeout`` (a timer kills it, which ends the read)."""
    assert process.stdout is not None
    seen: list[str] = []
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        for got in process.stdout:
            seen.append(got.rstrip("\n"))
            if seen[-1].startswith(line):
                return seen[-1]
    finally:
        timer.cancel()
    process.kill()
    _, stderr = process.communicate()
    raise AssertionError(f"no {line!r} within {timeout}s; stdout: {seen}; stderr: {stderr}")


BLOCKS = blocks()
