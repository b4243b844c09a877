"""Fixtures of the chaos scenarios: ``jobs_cluster``, a :class:`~tests.chaos.jobcluster.JobCluster`
on ``k8s_apiserver`` per test (its processes stopped and the embedded server's faults cleared
after), shared by the job-holder scenarios."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from k8slease.operator.crd import install_crd
from k8slease.testing.server import APIServer
from tests.chaos.jobcluster import JobCluster


@pytest.fixture
def jobs_cluster(k8s_apiserver: Any, k8s_namespace: str, tmp_path: Path) -> Iterator[JobCluster]:
    api = k8s_apiserver.api_client()
    install_crd(api)  # left installed: other tests of the session may use it too
    api.close()
    c = JobCluster(k8s_apiserver, k8s_namespace, tmp_path)
    try:
        yield c
    finally:
        c.procs.close()
        c.api.close()
        if isinstance(k8s_apiserver, APIServer):
            k8s_apiserver.faults.clear()
