"""The published benchmark figures match the committed results, and the results the code.

docs/benchmarks.md and README.md carry sections generated from benchmarks/results/*.json
(``benchmarks.publish``); each results file records the commit it measured. These tests run no
benchmark: they regenerate the sections in memory and read git history.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import provenance, publish

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _shallow_without(commit: str) -> bool:
    """A shallow clone that lacks ``commit`` cannot say what changed since (CI checkouts)."""
    shallow = provenance.git("rev-parse", "--is-shallow-repository") == "true"
    return shallow and not provenance.git("cat-file", "-t", commit)


def test_the_generated_sections_match_the_committed_results() -> None:
    differ = publish.differences()
    assert not differ, (
        f"{differ}: a generated section differs from what benchmarks/results/ generates; "
        "run `make bench-docs` (never edit between the generated markers by hand)"
    )


def test_no_results_file_is_older_than_the_code_it_measures() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the history of the measured files is unknown")
    commits = {provenance.read(p)["provenance"]["commit"] for p in RESULTS.glob("*.json")}
    if any(_shallow_without(c) for c in commits):
        pytest.skip("a shallow clone without the recorded commits (fetch the full history)")
    messages = publish.stale()
    assert not messages, "stale benchmark results:\n" + "\n".join(messages)


def test_every_results_file_names_a_known_benchmark_and_its_load() -> None:
    files = sorted(RESULTS.glob("*.json"))
    assert files, "no results committed"
    for path in files:
        document = provenance.read(path)
        assert document["benchmark"] in provenance.MEASURES, path
        load = document["provenance"]["load"]
        assert {"before", "after"} <= set(load), f"{path}: the load is not recorded"


# --- the checks themselves, on a throw-away repository -----------------------------------------


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _repo_with_results(tmp_path: Path, benchmark: str = "operator") -> tuple[Path, Path]:
    """A repository with one measured file, committed, and results of that commit."""
    repo = tmp_path / "repo"
    (repo / "k8slease" / "operator").mkdir(parents=True)
    (repo / "k8slease" / "operator" / "fold.py").write_text("x = 1\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "notes.md").write_text("prose\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "code")
    commit = _git(repo, "rev-parse", "HEAD")
    results = repo / "benchmarks" / "results"
    results.mkdir(parents=True)
    document = {
        "benchmark": benchmark,
        "provenance": {
            "commit": commit,
            "dirty": [],
            "command": "python -m benchmarks.bench_operator --groups 2000 --server embedded",
            "load": {"before": {}, "after": {}},
        },
        "figures": {},
    }
    (results / "operator_embedded_2000.json").write_text(json.dumps(document))
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "results")
    return repo, results


def test_a_change_to_measured_code_after_the_recorded_commit_makes_results_stale(
    tmp_path: Path,
) -> None:
    repo, results = _repo_with_results(tmp_path)
    assert publish.stale(repo, results) == []
    (repo / "docs" / "notes.md").write_text("more prose\n")  # not measured
    _git(repo, "commit", "-qam", "docs")
    assert publish.stale(repo, results) == []
    (repo / "k8slease" / "operator" / "fold.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "faster operator")
    messages = publish.stale(repo, results)
    assert len(messages) == 1
    assert "operator_embedded_2000.json" in messages[0] and "faster operator" in messages[0]
    assert (
        "rerun `python -m benchmarks.bench_operator --groups 2000 --server embedded`"
        in (messages[0])
    )


def test_results_of_uncommitted_code_or_an_unknown_commit_are_stale(tmp_path: Path) -> None:
    repo, results = _repo_with_results(tmp_path)
    path = results / "operator_embedded_2000.json"
    document = json.loads(path.read_text())
    document["provenance"]["dirty"] = ["k8slease/operator/fold.py"]
    path.write_text(json.dumps(document))
    assert "uncommitted changes" in publish.stale(repo, results)[0]
    document["provenance"] |= {"dirty": [], "commit": "0" * 40}
    path.write_text(json.dumps(document))
    assert "not in this history" in publish.stale(repo, results)[0]


def test_a_hand_edited_generated_section_is_found_and_rewritten(tmp_path: Path) -> None:
    for name in publish.DOCUMENTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    page = tmp_path / "docs" / "benchmarks.md"
    text = page.read_text()
    start = text.index("<!-- generated:operator -->\n") + len("<!-- generated:operator -->\n")
    page.write_text(text[:start] + "| convergence | 1 s |\n" + text[start:])
    assert publish.differences(tmp_path, RESULTS) == ["docs/benchmarks.md"]
    assert publish.write(tmp_path, RESULTS) == ["docs/benchmarks.md"]
    assert page.read_text() == (ROOT / "docs" / "benchmarks.md").read_text()
    assert publish.differences(tmp_path, RESULTS) == []


def test_a_missing_or_unknown_marker_is_a_clear_error() -> None:
    with pytest.raises(publish.PublishError, match=r"missing \['operator'\]"):
        publish.render("no markers\n", RESULTS, ("operator",), "page.md")
    bad = "<!-- generated:nonsense -->\nx\n<!-- /generated:nonsense -->\n"
    with pytest.raises(publish.PublishError, match=r"unknown \['nonsense'\]"):
        publish.render(bad, RESULTS, (), "page.md")


def test_prose_around_the_sections_is_kept() -> None:
    text = "before\n<!-- generated:apiserver -->\nold\n<!-- /generated:apiserver -->\nafter\n"
    out = publish.render(text, RESULTS, ("apiserver",), "page.md")
    assert out.startswith("before\n<!-- generated:apiserver -->\n")
    assert out.endswith("<!-- /generated:apiserver -->\nafter\n")
    assert "old" not in out
