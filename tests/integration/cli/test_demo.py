"""``make demo`` in its quick mode: processes, a SIGKILL and a SIGTERM failover, the operator,
and the final check that no invoice tick ran twice (the demo exits non-zero otherwise)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_demo_runs_the_whole_story_and_exits_zero(k8s_apiserver: Any) -> None:
    """The story ends with the result shown by ``k8slease status`` on the embedded server and by
    kubectl (where installed) on the real one: each way once, not each way on each server."""
    use_kubectl = not k8s_apiserver.embedded and shutil.which("kubectl") is not None
    command = [sys.executable, "-m", "k8slease", "demo", "--quick"]
    if not k8s_apiserver.embedded:  # embedded: the demo starts its own server, as `make demo`
        namespace = f"demo-{uuid.uuid4().hex[:6]}"
        command += ["--kubeconfig", str(k8s_apiserver.kubeconfig), "--namespace", namespace]
    if not use_kubectl:
        command.append("--no-kubectl")
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "kubeconfig: " in out
    assert re.search(r"took over [0-9.]+ s after SIGKILL", out)
    graceful = re.search(r"took over ([0-9.]+) s after SIGTERM", out)
    assert graceful and float(graceful.group(1)) < 1.0
    assert "every invoice tick ran exactly once" in out
    if use_kubectl:
        assert re.search(r"^billing\s+replica-\d-\w+\s+\d+", out, re.MULTILINE), out
    else:
        assert "GROUP billing" in out and "nightly-invoices" in out
        assert "failover history (from the operator):" in out
