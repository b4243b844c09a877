"""The missing-CRD hint's commands work as printed, on each API server (issue 21: its
``kubectl apply -f -`` failed on the embedded server, which serves no OpenAPI document)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from k8slease.operator.preflight import crd_install_hint

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")


def test_the_print_crd_pipe_of_the_hint_installs_the_crd(
    k8s_fresh_apiserver: object, tmp_path: Path
) -> None:
    kubeconfig = str(k8s_fresh_apiserver.kubeconfig)
    [line] = [x for x in crd_install_hint().splitlines() if "--print-crd |" in x]
    printer, applier = (part.split() for part in line.strip().split("|"))
    assert printer[:3] == ["k8slease", "operator", "--print-crd"]
    crd = subprocess.run(
        [sys.executable, "-m", "k8slease", *printer[1:]],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    done = subprocess.run(
        [applier[0], "--kubeconfig", kubeconfig, "--cache-dir", str(tmp_path), *applier[1:]],
        input=crd, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "scheduledjobgroups.k8slease.io" in done.stdout
