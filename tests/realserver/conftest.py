"""Tests that only a real kube-apiserver can answer: RBAC, the chart's install, differential
fidelity. They take ``k8s_real_apiserver`` (the plugin skips or fails them when the real
control plane is unavailable, by its own policy)."""

from __future__ import annotations

from collections import Counter

import pytest

TALLY = pytest.StashKey[Counter[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TALLY] = Counter()


@pytest.fixture
def fidelity_tally(request: pytest.FixtureRequest) -> Counter[str]:
    """Counters the differential test adds to; shown at the end of the run."""
    return request.config.stash[TALLY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tally = terminalreporter.config.stash.get(TALLY, Counter())
    if tally["sequences"]:
        terminalreporter.write_line(
            f"differential fidelity: {tally['sequences']} sequences, {tally['pairs']} response "
            f"pairs compared, {tally['differences']} differences "
            f"({tally['known']} known and documented in docs/fidelity.md)"
        )
