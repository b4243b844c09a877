"""pytest fixtures for the embedded API server, the real control plane and a real cluster.

pytest loads this plugin through k8slease's ``pytest11`` entry point wherever k8slease is
installed: take the fixtures, do not list it in ``pytest_plugins`` (pytest would refuse to
register it twice). The embedded server is imported only when a fixture needs it, so the plugin
costs nothing in a core install; the fixtures need ``pip install 'k8slease[testing]'``.

Fixtures:

- ``k8s_apiserver`` (session): the target server. Parametrized over ``--k8s-server``:
  ``embedded`` (an :class:`APIServer`), ``real`` (a :class:`ControlPlane`: etcd and
  kube-apiserver built from upstream) or ``both`` (test ids end in ``[embedded]``/``[real]``).
  The default is ``both`` where Go or cached binaries exist, else ``embedded``;
- ``k8s_api_client``: a ``kubernetes.client.ApiClient`` for it, closed after the test;
- ``k8s_namespace``: a fresh namespace for the test, deleted afterwards (not waited for: the
  real control plane has no namespace controller, a deleted namespace stays Terminating);
- ``k8s_crd``: installs CRDs (waiting until they are Established and discoverable), deletes
  them afterwards;
- ``k8s_embedded_apiserver``: a fresh embedded server per test, for faults and stats (it is
  always embedded, whatever the option);
- ``k8s_fresh_apiserver``: a fresh server of the test's kind (embedded, or a new real control
  plane with an audit log), for tests that need a server to themselves;
- ``k8s_real_apiserver`` (session): the real control plane, for tests only it can answer
  (RBAC, TokenRequest); skipped, with the reason, when the real tier is off.

Tests that use the shared fixtures but need the embedded server's own features carry
``@pytest.mark.embedded_only``; tests of what the real control plane cannot show (no
controller-manager, a fresh etcd) carry ``@pytest.mark.not_on_control_plane(reason)``.
With ``CI`` set and Go present (or ``--k8s-server=real|both`` given), a real control plane
that cannot be built or started is a test error, never a skip.

Real-cluster mode is opt-in: ``--kubeconfig PATH`` (the option pytest-kind defines; we reuse
it and never redefine it) or the ``K8SLEASE_TEST_KUBECONFIG`` environment variable. A plain
``KUBECONFIG`` is deliberately ignored: it often points at a developer's production cluster,
and tests create and delete namespaces.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pytest

from . import tiers
from .controlplane import BuildError, ControlPlane, ControlPlaneError, cached, go_available
from .controlplane.cache import cache_root
from .controlplane.certs import CertificateError

if TYPE_CHECKING:
    from .server import APIServer

ENV_KUBECONFIG = "K8SLEASE_TEST_KUBECONFIG"
TIERS = pytest.StashKey[tiers.Tiers]()


class ExternalCluster:
    """A real cluster reached through a kubeconfig; the same surface tests use on APIServer."""

    embedded = False

    def __init__(self, kubeconfig: str | Path) -> None:
        import kubernetes.client
        import kubernetes.config

        loader: Any = kubernetes.config.load_kube_config  # untyped in the client
        self.kubeconfig = Path(kubeconfig)
        self._configuration = kubernetes.client.Configuration()
        loader(config_file=str(self.kubeconfig), client_configuration=self._configuration)
        self.url = str(self._configuration.host)

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` for the cluster."""
        import kubernetes.client

        return kubernetes.client.ApiClient(self._configuration)


#: The servers a test may get (a string: the embedded server is imported only when used).
Server: TypeAlias = "APIServer | ControlPlane | ExternalCluster"


def _embedded_server() -> APIServer:
    """A new (not yet started) embedded server; a clear error without the testing extra."""
    try:
        from .server import APIServer
    except ModuleNotFoundError as exc:
        raise pytest.UsageError(
            "the k8s_* fixtures need the embedded API server: "
            f"pip install 'k8slease[testing]' ({exc})"
        ) from None
    return APIServer()


def real_cluster_kubeconfig(config: pytest.Config) -> str | None:
    """The kubeconfig of an opted-in real cluster, or None to use the embedded server."""
    try:
        option = config.getoption("kubeconfig", default=None)
    except ValueError:
        option = None
    return option or os.environ.get(ENV_KUBECONFIG) or None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("k8slease").addoption(
        "--k8s-server",
        choices=tiers.CHOICES,
        default=None,
        help="API server(s) the k8s_* fixtures use: the embedded one, the real control plane "
        "(etcd + kube-apiserver built from upstream), or both (default: both where Go or "
        "cached binaries exist, else embedded)",
    )


def _real_possible() -> str | None:
    """None when the real control plane can run here, else why not."""
    if cached() is not None or go_available():
        return None
    return (
        f"{tiers.NOT_RUN}: Go is not on PATH and no binaries are "
        f"cached in {cache_root()} (install Go >= 1.26, see docs/testing.md)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded_only: uses the shared k8s_* fixtures but needs the embedded server's own "
        "features (faults, stats, exact resourceVersions); runs on [embedded] only",
    )
    config.addinivalue_line(
        "markers",
        "not_on_control_plane(reason): the real control plane cannot show this (no controller-"
        "manager, a fresh etcd); skipped on [real] with the reason, run on the others",
    )
    try:
        config.stash[TIERS] = tiers.choose(
            config.getoption("k8s_server", default=None),
            real_cluster_kubeconfig(config),
            _real_possible(),
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_report_header(config: pytest.Config) -> str:
    chosen = config.stash[TIERS]
    line = f"k8slease API servers: {', '.join(chosen.servers)}"
    return line + (f" ({chosen.real_skipped})" if chosen.real_skipped else "")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    chosen = terminalreporter.config.stash.get(TIERS, None)
    if chosen is not None and chosen.real_skipped and tiers.EXTERNAL not in chosen.servers:
        terminalreporter.write_line(f"k8slease: {chosen.real_skipped}", yellow=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``k8s_apiserver`` (directly or through the other fixtures) on
    each chosen server; ``embedded_only`` tests on the embedded one, and tests that take
    ``k8s_real_apiserver`` on the real one."""
    if "k8s_apiserver" not in metafunc.fixturenames:
        return
    servers = metafunc.config.stash[TIERS].servers
    if "k8s_real_apiserver" in metafunc.fixturenames:
        servers = (tiers.REAL,)  # k8s_namespace & co. then live on that same real server
    elif metafunc.definition.get_closest_marker("embedded_only") is not None:
        servers = (tiers.EMBEDDED,)
    metafunc.parametrize("k8s_apiserver", servers, indirect=True, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        mark = item.get_closest_marker("not_on_control_plane")
        callspec = getattr(item, "callspec", None)
        if mark is None or callspec is None:
            continue
        if callspec.params.get("k8s_apiserver") == tiers.REAL:
            reason = mark.args[0] if mark.args else mark.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"not on the real control plane: {reason}"))


@pytest.fixture(scope="session")
def k8s_apiserver(request: pytest.FixtureRequest) -> Iterator[Server]:
    """The API server tests talk to: embedded, the real control plane, or an opted-in cluster."""
    kind = getattr(request, "param", tiers.EMBEDDED)
    if kind == tiers.EXTERNAL:
        kubeconfig = real_cluster_kubeconfig(request.config)
        assert kubeconfig is not None
        yield ExternalCluster(kubeconfig)
    elif kind == tiers.REAL:
        yield request.getfixturevalue("k8s_real_apiserver")
    else:
        with _embedded_server() as server:
            yield server


@pytest.fixture(scope="session")
def k8s_real_apiserver(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The real control plane (etcd + kube-apiserver), started once per session.

    Skipped with the reason when the real tier is off; when it is on but cannot be built or
    started, the test errors if the tier is required (``CI``, or ``--k8s-server`` given) and
    is skipped with the cause otherwise. Building (first use per machine) prints progress.
    """
    chosen = request.config.stash[TIERS]
    if not chosen.real:
        pytest.skip(chosen.real_skipped or tiers.NOT_RUN)
    plane = ControlPlane(audit=True)  # tests count their own requests in plane.audit_log
    capture: Any = request.config.pluginmanager.getplugin("capturemanager")
    try:
        if capture is not None:
            with capture.global_and_fixture_disabled():
                plane.start()  # a first build prints progress for minutes: let it show
        else:
            plane.start()
    except (BuildError, ControlPlaneError, CertificateError) as exc:
        if chosen.real_required:
            raise
        pytest.skip(f"the real control plane could not start: {exc}")
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def k8s_api_client(k8s_apiserver: Server) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` for ``k8s_apiserver``; faults are cleared after."""
    client = k8s_apiserver.api_client()
    try:
        yield client
    finally:
        client.close()
        if not isinstance(k8s_apiserver, ExternalCluster | ControlPlane):
            k8s_apiserver.faults.clear()


@pytest.fixture
def k8s_namespace(k8s_api_client: Any) -> Iterator[str]:
    """A fresh namespace for one test, deleted (with its contents) afterwards.

    The deletion is not waited for: on the real control plane (no namespace controller) the
    namespace stays Terminating, which no other test notices (names are unique).
    """
    import kubernetes.client

    core = kubernetes.client.CoreV1Api(k8s_api_client)
    name = f"k8slease-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))
    )
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def k8s_fresh_apiserver(k8s_apiserver: Server) -> Iterator[APIServer | ControlPlane]:
    """A fresh server of this test's kind, for tests that need one to themselves: a new
    :class:`APIServer` on ``[embedded]``, a new ``ControlPlane(audit=True)`` on ``[real]``
    (about 6 s to start). Skipped on an opted-in real cluster."""
    if isinstance(k8s_apiserver, ControlPlane):
        with ControlPlane(audit=True) as plane:
            yield plane
    elif not isinstance(k8s_apiserver, ExternalCluster):
        with _embedded_server() as server:
            yield server
    else:
        pytest.skip("a fresh server is made only for the embedded and the real control plane")


@pytest.fixture
def k8s_embedded_apiserver() -> Iterator[APIServer]:
    """A fresh embedded :class:`APIServer` for one test (faults, stats, resourceVersions)."""
    with _embedded_server() as server:
        yield server


def wait_established(api_client: Any, name: str, timeout: float = 60.0) -> None:
    """Block until the CRD ``name`` has ``Established=True``, watching (not polling) for it."""
    import kubernetes.client
    import kubernetes.watch

    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    watch: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    for event in watch.stream(
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        timeout_seconds=int(timeout),
    ):
        conditions = (event["raw_object"].get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            watch.stop()
            return
    raise TimeoutError(f"CRD {name} not established within {timeout} s")


def wait_discoverable(api_client: Any, crd: dict[str, Any], timeout: float = 60.0) -> None:
    """Block until every served version of ``crd`` lists its resource in discovery.

    kube-apiserver sets ``Established`` before its discovery controller publishes the group
    version, so ``GET /apis/<group>/<version>`` may answer 404 for a moment after it (kubectl
    and client-go refresh discovery and try again); there is no event to wait on, so this polls.
    """
    import time

    import kubernetes.client

    spec = crd["spec"]
    plural = spec["names"]["plural"]
    versions = [v["name"] for v in spec["versions"] if v.get("served", True)]
    custom: Any = kubernetes.client.CustomObjectsApi(api_client)
    deadline = time.monotonic() + timeout
    for version in versions:
        while True:
            try:
                found = custom.get_api_resources(spec["group"], version)
                if any(r.name == plural for r in found.resources or []):
                    break
            except kubernetes.client.ApiException as exc:
                if exc.status != 404:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{plural}.{spec['group']}/{version} not discoverable")
            time.sleep(0.05)


@pytest.fixture
def k8s_crd(k8s_api_client: Any) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """``k8s_crd(manifest)`` creates a CRD, waits until it is served, and returns it as a dict.

    Every CRD created this way is deleted after the test (with its custom resources).
    """
    import kubernetes.client

    ext: Any = kubernetes.client.ApiextensionsV1Api(k8s_api_client)
    created: list[str] = []

    def install(manifest: dict[str, Any]) -> dict[str, Any]:
        crd = ext.create_custom_resource_definition(manifest)
        name: str = crd.metadata.name
        created.append(name)
        wait_established(k8s_api_client, name)
        result: dict[str, Any] = k8s_api_client.sanitize_for_serialization(crd)
        wait_discoverable(k8s_api_client, result)
        return result

    yield install
    for name in created:
        try:
            ext.delete_custom_resource_definition(name)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
        wait_deleted(k8s_api_client, name)


def wait_deleted(api_client: Any, name: str, timeout: float = 60.0) -> None:
    """Block until the CRD ``name`` is gone (a real server first removes its custom
    resources, behind a finalizer), so the next test can create it again."""
    import kubernetes.client
    import kubernetes.watch

    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    try:
        crd: Any = ext.read_custom_resource_definition(name)
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return
        raise
    watch: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    for event in watch.stream(
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        resource_version=crd.metadata.resource_version,
        timeout_seconds=int(timeout),
    ):
        if event["type"] == "DELETED":
            watch.stop()
            return
    raise TimeoutError(f"CRD {name} not deleted within {timeout} s")
