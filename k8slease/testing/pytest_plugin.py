"""pytest fixtures for the embedded API server (and for a real cluster, unchanged tests).

pytest loads this plugin through k8slease's ``pytest11`` entry point wherever k8slease is
installed: take the fixtures, do not list it in ``pytest_plugins`` (pytest would refuse to
register it twice). The embedded server is imported only when a fixture needs it, so the plugin
costs nothing in a core install; the fixtures need ``pip install 'k8slease[testing]'``.

Fixtures:

- ``k8s_apiserver`` (session): the target cluster, an :class:`APIServer` by default;
- ``k8s_api_client``: a ``kubernetes.client.ApiClient`` for it, closed after the test;
- ``k8s_namespace``: a fresh namespace for the test, deleted afterwards;
- ``k8s_crd``: installs CRDs (waiting until they are Established), deletes them afterwards;
- ``k8s_embedded_apiserver``: a fresh embedded server per test, for faults and stats (it is
  always embedded, even in real-cluster mode).

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
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .server import APIServer

ENV_KUBECONFIG = "K8SLEASE_TEST_KUBECONFIG"


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


@pytest.fixture(scope="session")
def k8s_apiserver(request: pytest.FixtureRequest) -> Iterator[APIServer | ExternalCluster]:
    """The API server tests talk to: embedded, or a real cluster when opted in."""
    kubeconfig = real_cluster_kubeconfig(request.config)
    if kubeconfig:
        yield ExternalCluster(kubeconfig)
        return
    with _embedded_server() as server:
        yield server


@pytest.fixture
def k8s_api_client(k8s_apiserver: APIServer | ExternalCluster) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` for ``k8s_apiserver``; faults are cleared after."""
    client = k8s_apiserver.api_client()
    try:
        yield client
    finally:
        client.close()
        if not isinstance(k8s_apiserver, ExternalCluster):
            k8s_apiserver.faults.clear()


@pytest.fixture
def k8s_namespace(k8s_api_client: Any) -> Iterator[str]:
    """A fresh namespace for one test, deleted (with its contents) afterwards."""
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
        return result

    yield install
    for name in created:
        try:
            ext.delete_custom_resource_definition(name)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
