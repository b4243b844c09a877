"""The published figures, generated from the results files: ``python -m benchmarks.publish``.

docs/benchmarks.md and README.md carry marked sections::

    <!-- generated:NAME -->
    ...
    <!-- /generated:NAME -->

Each is rewritten in place from ``benchmarks/results/*.json`` (``benchmarks.sections`` renders
them); the text around them is hand-written prose and is left alone. ``make bench`` runs the
benchmarks and then this; ``--check`` only reports what differs. :func:`stale` says which
results files are older than the code they measure (``benchmarks.provenance.MEASURES``):
tests/unit/test_published_benchmarks.py fails on either, so the page cannot drift from the
results, nor the results from the code.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from benchmarks import provenance
from benchmarks.sections import SECTIONS
from benchmarks.sections import PublishError as PublishError  # callers catch publish.PublishError

ROOT = provenance.ROOT
#: The document -> the sections it carries, in order.
DOCUMENTS: dict[str, tuple[str, ...]] = {
    "docs/benchmarks.md": (
        "electors-embedded",
        "electors-real",
        "locks",
        "locks-scale",
        "operator",
        "apiserver",
        "provenance",
    ),
    "README.md": ("readme",),
}
_MARKED = re.compile(
    r"(<!-- generated:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)",
    re.DOTALL,
)


def render(text: str, results: Path, expected: tuple[str, ...], where: str) -> str:
    """``text`` with every marked section rewritten from ``results``; PublishError when one of
    ``expected`` is missing or a marker names no known section."""
    found = [m.group("name") for m in _MARKED.finditer(text)]
    unknown = sorted(set(found) - set(SECTIONS))
    missing = [name for name in expected if name not in found]
    if unknown or missing:
        raise PublishError(
            f"{where}: sections unknown {unknown}, missing {missing} "
            "(each needs <!-- generated:NAME --> and <!-- /generated:NAME --> on lines of "
            "their own)"
        )

    def replace(match: re.Match[str]) -> str:
        body = SECTIONS[match.group("name")](results).rstrip("\n")
        return f"{match.group(1)}{body}\n{match.group(4)}"

    return _MARKED.sub(replace, text)


def differences(root: Path = ROOT, results: Path | None = None) -> list[str]:
    """The documents whose generated sections differ from what ``results`` generate."""
    results = results or root / "benchmarks" / "results"
    out: list[str] = []
    for name, expected in DOCUMENTS.items():
        text = (root / name).read_text()
        if render(text, results, expected, name) != text:
            out.append(name)
    return out


def write(root: Path = ROOT, results: Path | None = None) -> list[str]:
    """Rewrite the generated sections in place; the documents that changed."""
    results = results or root / "benchmarks" / "results"
    changed: list[str] = []
    for name, expected in DOCUMENTS.items():
        path = root / name
        text = path.read_text()
        new = render(text, results, expected, name)
        if new != text:
            path.write_text(new)
            changed.append(name)
    return changed


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)


def stale(root: Path = ROOT, results: Path | None = None) -> list[str]:
    """One message per results file older than the code it measures: a file of
    ``MEASURES[benchmark]`` changed in a commit after the one the results record (or the
    results were taken with those files uncommitted, or on a commit not in this history)."""
    results = results or root / "benchmarks" / "results"
    messages: list[str] = []
    for path in sorted(results.glob("*.json")):
        document = provenance.read(path)
        benchmark = document["benchmark"]
        p = document["provenance"]
        rerun = f"rerun `{p.get('command', benchmark)}`"
        where = f"{path.relative_to(root)} (benchmark {benchmark!r})"
        if benchmark not in provenance.MEASURES:
            messages.append(f"{where}: unknown benchmark; known: {list(provenance.MEASURES)}")
            continue
        commit = p.get("commit") or ""
        if not commit:
            messages.append(f"{where}: records no commit; {rerun}")
            continue
        if p.get("dirty"):
            messages.append(f"{where}: measured uncommitted changes to {p['dirty']}; {rerun}")
        if _git(root, "merge-base", "--is-ancestor", commit, "HEAD").returncode != 0:
            messages.append(f"{where}: measured commit {commit[:10]}, not in this history; {rerun}")
            continue
        log = _git(
            root, "log", "--format=%h %s", f"{commit}..HEAD", "--", *provenance.MEASURES[benchmark]
        )
        if log.returncode != 0:
            messages.append(f"{where}: git log failed: {log.stderr.strip()}")
        elif log.stdout.strip():
            changes = log.stdout.strip().splitlines()
            shown = "; ".join(changes[:3]) + (
                f"; and {len(changes) - 3} more" if len(changes) > 3 else ""
            )
            messages.append(
                f"{where}: the code it measures changed after commit {commit[:10]} "
                f"({shown}); {rerun}, then `make bench-docs`"
            )
    return messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.publish", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="only report what differs")
    args = parser.parse_args(argv)
    try:
        if args.check:
            differ = differences()
            for name in differ:
                print(f"{name}: its generated sections differ from the results", file=sys.stderr)
            for message in stale():
                print(message, file=sys.stderr)
            return 1 if differ or stale() else 0
        for name in write():
            print(f"rewrote the generated sections of {name}")
    except PublishError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
