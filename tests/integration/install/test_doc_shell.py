"""The shell blocks of docs/install.md, docs/testing.md and docs/operator.md, each document's in
one session (``docsession.py``); README.md's ``make demo`` has a file of its own
(``test_doc_make.py``), so that pytest-xdist runs it beside these (``--dist loadfile``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.install.conftest import Venv
from tests.integration.install.docblocks import BLOCKS
from tests.integration.install.docsession import RUN_IN_SESSION, SESSIONS, run_session, server_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_every_shell_block_belongs_to_a_session() -> None:
    documents = {b.path.name for b in BLOCKS if b.mode in RUN_IN_SESSION}
    assert documents <= set(SESSIONS), f"add a session for {documents - set(SESSIONS)}"


@pytest.mark.parametrize("name", sorted(set(SESSIONS) - {"README.md"}))
def test_shell_blocks_run_in_order(
    name: str, request: pytest.FixtureRequest, demo_venv: Venv, wheelhouse: Path, tmp_path: Path
) -> None:
    with server_for(name, request, demo_venv, tmp_path) as kubeconfig:
        run_session(name, kubeconfig, demo_venv, wheelhouse, tmp_path)
