"""Shared set-up: the chart's render script (``render_manifests``) and the peers' helpers
(``peerproc``, tests/peers) are importable; ``--admission-policy`` installs the chart's
admission policy on the real control plane (tests/admission_policy.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHARTS = Path(__file__).resolve().parents[1] / "charts"
PEERS = Path(__file__).resolve().parent / "peers"
for _path in (CHARTS, PEERS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import admission_policy  # noqa: E402  (tests/ is on sys.path: pytest's rootdir conftest)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("k8slease").addoption(
        admission_policy.OPTION,
        action="store_true",
        default=False,
        help="install the chart's ValidatingAdmissionPolicy on the real control plane for the "
        "whole session (tests/admission_policy.py says what it exercises)",
    )


@pytest.fixture(scope="session")
def k8s_real_apiserver(k8s_real_apiserver: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The plugin's real control plane, with the chart's admission policy installed when
    ``--admission-policy`` is given."""
    if not request.config.getoption(admission_policy.OPTION):
        yield k8s_real_apiserver
        return
    admin = k8s_real_apiserver.api_client()
    try:
        installed = admission_policy.install(admin)
        yield k8s_real_apiserver
        admission_policy.uninstall(admin, installed)
    finally:
        admin.close()
