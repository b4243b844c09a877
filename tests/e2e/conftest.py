"""The kind end-to-end suite (``make e2e``, marker ``kind``).

Where ``kind``, ``kubectl`` or a working Docker daemon is missing, every test here is skipped at
collection with the reason, and no cluster is created. Nothing is ever downloaded: pytest-kind
fetches kind and kubectl when it is not given paths, so ``kind_cluster`` below replaces its
fixture and always passes the binaries found on PATH.

Options (pytest-kind's): ``--cluster-name`` (default here: k8slease-e2e), ``--keep-cluster``,
``--kind-image`` (node image, e.g. kindest/node:v1.30.0), ``--kubeconfig`` (where the cluster's
kubeconfig is written; k8slease's pytest plugin then targets that cluster in real-cluster mode).
Environment: ``K8SLEASE_E2E_IMAGE`` names a prebuilt image to load instead of building one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.e2e.app_pods import APP, REPLICAS, kubectl_path, steady, wait_until
from tests.e2e.e2e_clusters import E2ECluster, KindCluster, NodeCluster, choose, required
from tests.e2e.leasehistory import LeaseHistory
from tests.e2e.runlog import PodLogs

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "charts" / "k8slease"
E2E_DIR = Path(__file__).resolve().parent
#: Namespace and release of the chart on the kind cluster.
NAMESPACE = "k8slease-e2e"
RELEASE = "k8slease"
DEFAULT_CLUSTER_NAME = "k8slease-e2e"
IMAGE = os.environ.get("K8SLEASE_E2E_IMAGE", "k8slease:e2e")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    # After every other implementation ran, so `-m 'not kind'` has already deselected these
    # tests and `make test` never even probes for a cluster.
    result = yield
    e2e_items = [item for item in items if E2E_DIR in Path(str(item.path)).parents]
    if e2e_items:
        chosen, reason = choose()
        if chosen is None and not required():
            skip = pytest.mark.skip(reason=f"no cluster for the e2e suite ({reason})")
            for item in e2e_items:
                item.add_marker(skip)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test on the node cluster gets a section with the cluster's state and its node
    logs' tails: the cluster and its logs are gone once the suite ends (as on CI)."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    cluster = funcargs.get("e2e_cluster")
    if report.failed and call.when == "call" and isinstance(cluster, NodeCluster):
        try:
            report.sections.append(("the node cluster", cluster.diagnostics(NAMESPACE)))
        except Exception as error:  # a report must not hide the failure itself
            report.sections.append(("the node cluster", f"no diagnostics: {error!r}"))
    return report


@pytest.fixture(scope="session")
def e2e_cluster(request: pytest.FixtureRequest) -> Iterator[E2ECluster]:
    """The cluster of the suite: kind where it works, else k8slease's single-node cluster
    (``K8SLEASE_E2E_CLUSTER=kind|node`` forces one)."""
    chosen, reason = choose()
    if chosen is None:
        if required():
            pytest.fail(f"CI with Go and root: the e2e cluster must run here, but {reason}")
        pytest.skip(reason)
    cluster: NodeCluster | KindCluster
    if chosen == "kind":
        name = request.config.getoption("cluster_name")
        if name == "pytest-kind":  # pytest-kind's default: give ours a recognisable name
            name = DEFAULT_CLUSTER_NAME
        cluster = KindCluster(
            name, request.config.getoption("kubeconfig"), request.config.getoption("kind_image")
        )
    else:
        cluster = NodeCluster()
    with _sigterm_interrupts():
        cluster.start()
        try:
            yield cluster
        finally:
            if chosen == "node" or not request.config.getoption("keep_cluster"):
                cluster.stop()


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends the suite as Ctrl-C does, so the cluster is still stopped: `.ci/run` stops
    a still-running e2e part with SIGTERM when `make test` fails, and Python's default would end
    pytest at once, leaving the node's pods (their shims run in sessions of their own), mounts
    and network namespace behind."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def k8slease_image(e2e_cluster: E2ECluster) -> str:
    """The k8slease image, built from the Dockerfile and loaded into the cluster's node."""
    e2e_cluster.load_image(REPO_ROOT, IMAGE)
    return IMAGE


def chart_values(image: str) -> dict[str, Any]:
    repository, _, tag = image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "operator": {"logLevel": "debug"},
        "exampleApp": {
            "enabled": True,
            # Short periods: a 3-second leader Lease, so a failover shows within seconds.
            "args": ["--fast", "--health-port", "8080"],
            # its Role reaches the Leases of these jobs alone: journaled is the one lock of
            # test_journal_merged.py's replica (a pod of this ServiceAccount)
            "jobs": ["nightly-invoices", "journaled"],
            "scheduledJobGroup": {"create": True, "jobs": []},
        },
        # `helm test` without a leader fails after this (test_helm_test.py checks it does).
        "tests": {"leaderTimeoutSeconds": 10},
    }


class HelmRelease:
    """The chart installed by the real ``helm`` (built from helm.sh/helm/v3) into a namespace
    that enforces the "restricted" Pod Security Standard. A test may uninstall it
    (``test_helm_uninstall``); the next test that needs it installs it again
    (:meth:`ensure`), so no test depends on which ran before it."""

    namespace = NAMESPACE
    name = RELEASE

    def __init__(self, cluster: E2ECluster, values: Path) -> None:
        self.cluster = cluster
        self.values = values
        self.summary = ""

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def installed(self) -> bool:
        try:
            self.cluster.helm("status", self.name, "-n", self.namespace)
        except subprocess.CalledProcessError:
            return False
        return True

    def ensure(self) -> None:
        if self.installed():
            return
        namespaces = self.cluster.kubectl("get", "namespaces", "-o", "name").split()
        if f"namespace/{self.namespace}" not in namespaces:
            self.cluster.kubectl("create", "namespace", self.namespace)
            self.cluster.kubectl(
                "label",
                "namespace",
                self.namespace,
                "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/warn=restricted",
            )
        self.summary = self.cluster.helm(
            "install",
            self.name,
            str(CHART_DIR),
            "-n",
            self.namespace,
            "-f",
            str(self.values),
            "--wait",
            "--timeout",
            "300s",
        )


@pytest.fixture(scope="session")
def _installed_release(
    e2e_cluster: E2ECluster, k8slease_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HelmRelease]:
    values = tmp_path_factory.mktemp("helm") / "values.json"
    values.write_text(json.dumps(chart_values(k8slease_image)))
    release = HelmRelease(e2e_cluster, values)
    release.ensure()
    try:
        yield release
    finally:
        if release.installed():
            e2e_cluster.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
        e2e_cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")


@pytest.fixture
def helm_release(_installed_release: HelmRelease) -> HelmRelease:
    """The chart's release, installed (again, if a test uninstalled it)."""
    _installed_release.ensure()
    return _installed_release


@pytest.fixture
def app(e2e_cluster: E2ECluster, helm_release: HelmRelease) -> list[dict[str, Any]]:
    """The state every tick test starts from: the chart's 3 replicas, Ready, one leading."""
    e2e_cluster.kubectl("scale", f"deployment/{APP}", "-n", NAMESPACE, f"--replicas={REPLICAS}")
    return steady(e2e_cluster)


@pytest.fixture
def history(e2e_cluster: E2ECluster, app: Any) -> Iterator[LeaseHistory]:
    """A watch of the namespace's Leases: every claim and run record, in order."""
    with LeaseHistory(e2e_cluster.kubeconfig_path, NAMESPACE) as watched:
        yield watched


@pytest.fixture
def logs(e2e_cluster: E2ECluster, app: Any) -> Iterator[PodLogs]:
    """Every app pod's log, followed from the moment the pod is listed and kept."""
    with PodLogs(
        kubectl_path(e2e_cluster),
        e2e_cluster.kubeconfig_path,
        NAMESPACE,
        f"app.kubernetes.io/name={APP}",
    ) as followed:
        wait_until(lambda: len(followed.pods()) >= REPLICAS, 120, "the logs of the app pods")
        yield followed


@pytest.fixture
def start(history: LeaseHistory, logs: PodLogs) -> datetime:
    """The test's start: it judges the ticks from here on (the watch and the logs run)."""
    return datetime.now(UTC)
