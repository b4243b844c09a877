"""Checks the operator makes before it starts watching: an API server that answers, the
ScheduledJobGroup CRD installed, and the namespaces to watch present.

kopf itself would log a 404 every few seconds forever for a missing CRD; these checks end the
start with one message that says what is missing and the command that fixes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from k8slease.errors import K8sLeaseError
from k8slease.operator.crd import CRD_NAME, install_crd

#: Where the CRD's one definition lives in the repository (the chart installs it from there).
CRD_PATH = "charts/k8slease/crds/scheduledjobgroups.yaml"


class PreflightError(K8sLeaseError):
    """The operator cannot start; the message says why and what to run."""


def crd_install_hint() -> str:
    """The commands that install the CRD, for the message of a missing one."""
    return (
        "Install it with one of:\n"
        "  k8slease operator --print-crd | kubectl apply --validate=false -f -\n"
        f"  kubectl apply --validate=false -f {CRD_PATH}   (from a checkout of k8slease)\n"
        "  (--validate=false: the embedded API server serves no OpenAPI document for kubectl"
        " to validate against; the server validates the CRD either way)\n"
        "  k8slease operator --install-crd ...   (needs the right to create CRDs)\n"
        "The Helm chart installs it too (charts/k8slease)."
    )


def _server(api_client: client.ApiClient) -> str:
    return str(getattr(api_client.configuration, "host", "?"))


def check_crd(api_client: client.ApiClient, *, timeout: float) -> None:
    """Raise :class:`PreflightError` unless the CRD exists and is Established."""
    api = client.ApiextensionsV1Api(api_client)
    try:
        crd: Any = api.read_custom_resource_definition(CRD_NAME, _request_timeout=timeout)
    except ApiException as exc:
        if exc.status == 404:
            raise PreflightError(
                f"the CustomResourceDefinition {CRD_NAME} is not installed in the cluster at "
                f"{_server(api_client)}.\n{crd_install_hint()}"
            ) from None
        if exc.status in (401, 403):
            return _check_by_discovery(api_client, timeout=timeout)
        raise _unreachable(api_client, exc) from None
    except Exception as exc:  # connection refused, DNS, TLS, timeouts
        raise _unreachable(api_client, exc) from None
    conditions = (crd.status.conditions if crd.status else None) or []
    if not any(c.type == "Established" and c.status == "True" for c in conditions):
        raise PreflightError(
            f"the CustomResourceDefinition {CRD_NAME} exists but is not Established yet; "
            f"see: kubectl describe crd {CRD_NAME}"
        )


def _check_by_discovery(api_client: client.ApiClient, *, timeout: float) -> None:
    """Without the right to read CRDs: is the resource served? (Discovery is open to all.)"""
    from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION

    try:
        found: Any = client.CustomObjectsApi(api_client).get_api_resources(
            CRD_GROUP, CRD_VERSION, _request_timeout=timeout
        )
    except ApiException as exc:
        if exc.status == 404:
            found = None
        else:
            raise _unreachable(api_client, exc) from None
    except Exception as exc:
        raise _unreachable(api_client, exc) from None
    names = {r.name for r in (found.resources if found is not None else None) or []}
    if CRD_PLURAL not in names:
        raise PreflightError(
            f"the cluster at {_server(api_client)} does not serve {CRD_PLURAL}.{CRD_GROUP}/"
            f"{CRD_VERSION}: the CustomResourceDefinition {CRD_NAME} is not installed.\n"
            f"{crd_install_hint()}"
        )


def check_namespaces(
    api_client: client.ApiClient, namespaces: Sequence[str], *, timeout: float
) -> None:
    """Raise :class:`PreflightError` for a watched namespace that does not exist.

    Without the right to read namespaces (a 403), the check is skipped.
    """
    core = client.CoreV1Api(api_client)
    for namespace in namespaces:
        try:
            core.read_namespace(namespace, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status == 404:
                raise PreflightError(
                    f"namespace {namespace!r} does not exist in the cluster at "
                    f"{_server(api_client)} (given by --namespace, POD_NAMESPACE or the "
                    "kubeconfig context); create it or watch another one"
                ) from None
            if exc.status not in (401, 403):
                raise _unreachable(api_client, exc) from None
        except Exception as exc:
            raise _unreachable(api_client, exc) from None


def install_or_upgrade_crd(api_client: client.ApiClient, *, timeout: float) -> None:
    """``--install-crd``: create the CRD, or replace it with the packaged one, and wait."""
    try:
        install_crd(api_client, timeout=timeout, upgrade=True)
    except ApiException as exc:
        if exc.status in (401, 403):
            raise PreflightError(
                f"not allowed to install the CustomResourceDefinition {CRD_NAME} "
                f"({exc.status} {exc.reason}): run --install-crd with a cluster-admin "
                f"kubeconfig, or apply {CRD_PATH} as an admin"
            ) from None
        raise _unreachable(api_client, exc) from None
    except TimeoutError as exc:
        raise PreflightError(str(exc)) from None


def _unreachable(api_client: client.ApiClient, exc: BaseException) -> PreflightError:
    if isinstance(exc, ApiException):
        detail = f"{exc.status} {exc.reason}"
    else:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return PreflightError(f"cannot use the API server at {_server(api_client)}: {detail}")
