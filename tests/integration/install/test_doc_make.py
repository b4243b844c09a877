"""README.md's quick start, run as written in a fresh copy of the checkout (issue 21):
``make demo`` creates ``.venv`` (``make install``: pip from the wheelhouse only, filled once, like
the venvs of ``conftest.py``) and runs the whole demo; ``make test`` is left out (the suite
itself: this test runs inside it). The longest of the docs' tests (a minute or two), in a file
of its own so that pytest-xdist runs it beside the others (``--dist loadfile``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.install.conftest import Venv
from tests.integration.install.docsession import run_session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_readme_make_demo_runs_in_a_fresh_checkout(
    demo_venv: Venv, wheelhouse: Path, tmp_path: Path
) -> None:
    run_session("README.md", None, demo_venv, wheelhouse, tmp_path)
