"""Where a default Kubernetes ``ApiClient`` comes from: in-cluster, else a kubeconfig.

Each call builds a fresh client with its own ``Configuration``, so nothing global in the
kubernetes package is changed and several clients (say, for several test servers) can coexist.
"""

from __future__ import annotations

import os

import yaml
from kubernetes import client, config

from k8slease.errors import ConfigError


def default_api_client(
    *, kubeconfig: str | None = None, context: str | None = None, retries: bool = True
) -> client.ApiClient:
    """An ``ApiClient`` for the pod's service account, or else for a kubeconfig.

    With ``kubeconfig`` given it is used and in-cluster configuration is not tried. Otherwise the
    in-cluster configuration is used when ``KUBERNETES_SERVICE_HOST`` is set, then ``$KUBECONFIG``
    or ``~/.kube/config``. Raises ``ConfigError`` when none of them works.

    ``retries=False`` makes each call of the client's typed API one attempt: by default urllib3
    tries a refused connection three more times, logging a ``Retrying`` WARNING each time, before
    the error arrives (k8slease's own Lease and Event requests never retry: :mod:`.rawapi`).
    """
    configuration = client.Configuration()
    if not retries:
        configuration.retries = False  # read by the connection pool, made with the ApiClient
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException as exc:
            raise ConfigError(f"in-cluster configuration failed: {exc}") from exc
        return client.ApiClient(configuration)
    # $KUBECONFIG as it is now: the kubernetes package reads it once, at import time
    config_file = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        api_client: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=config_file, context=context, client_configuration=configuration
        )
        return api_client
    except (config.ConfigException, OSError, TypeError, ValueError, yaml.YAMLError) as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ConfigError(f"cannot load a Kubernetes configuration from {where}: {exc}") from exc


def api_client_if_configured() -> client.ApiClient | None:
    """:func:`default_api_client` where the elector or ``Jobs`` is made, so that a broken
    kubeconfig is reported there, not later at ``start()``; ``None`` (load it at start) when
    there is no configuration at all yet (not in a pod, no ``$KUBECONFIG``, no
    ``~/.kube/config``), so objects can still be made at import time and in tests."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        paths = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        if not any(os.path.isfile(part) for part in paths.split(os.pathsep) if part):
            return None
    return default_api_client()


def check_api_client(api_client: object, *, name: str = "api_client") -> client.ApiClient:
    """``api_client`` if it is a ``kubernetes.client.ApiClient``, else a ConfigError."""
    if not isinstance(api_client, client.ApiClient):
        raise ConfigError(
            f"{name} must be a kubernetes.client.ApiClient (for instance from"
            f" k8slease.kube.apiclient.default_api_client()), got {api_client!r}"
        )
    return api_client
