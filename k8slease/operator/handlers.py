"""kopf handlers of the k8slease operator: ``kopf run -m k8slease.operator.handlers``.

Leases are *observed*: an ``@kopf.on.event`` handler (which never patches the object it
sees) feeds every watch event of a Lease labelled ``k8slease.io/group`` into the registry, with a
server-side label selector so that other Leases (node heartbeats, other controllers) are not
even sent. The one Lease write is a replica's journal, read from the Pods labelled
``k8slease.io/group`` when a container ends (:mod:`k8slease.operator.podjournals`), registered
unless ``read_journals`` is off (``K8SLEASE_OPERATOR_READ_JOURNALS=false``, which
``--no-read-journals`` sets): without it the operator does not watch Pods at all, and needs no
access to them. ScheduledJobGroups are observed the same way; their status is written by the
runtime's write loop, never by kopf's change-tracking machinery, so kopf adds no annotations or
finalizers to either kind of object.

Settings come from ``memo["k8slease_settings"]`` when the operator is started by
:mod:`k8slease.operator.command`, otherwise from ``K8SLEASE_OPERATOR_*`` environment variables.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import kopf

from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION, LABEL_GROUP
from k8slease.operator.settings import ENV_PREFIX, OperatorConfig
from k8slease.operator.writeloop import OperatorRuntime

SETTINGS_KEY = "k8slease_settings"
RUNTIME_KEY = "k8slease_runtime"
LEASES = ("coordination.k8s.io", "v1", "leases")
PODS = ("", "v1", "pods")


def configure_kopf(settings: kopf.OperatorSettings, ops: OperatorConfig) -> None:
    """Adjust kopf's settings for an observe-only operator."""
    # kopf would turn handler log lines into Events on the observed objects (Leases); the
    # operator posts its own Events on ScheduledJobGroups instead.
    settings.posting.enabled = False
    # One operator replica, never kopf peering (no KopfPeering resource is installed); under
    # `kopf run` without --standalone too.
    settings.peering.standalone = True
    if not ops.all_namespaces:
        # Watching named namespaces needs no cluster-scoped access, and the chart's Role grants
        # none: without this, kopf lists Namespaces and CRDs cluster-wide at startup and retries
        # each 403 with back-off for about a minute before it starts watching.
        settings.scanning.disabled = True
    settings.watching.label_selectors[LEASES] = LABEL_GROUP
    settings.watching.label_selectors[PODS] = LABEL_GROUP
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = max(ops.request_timeout, 30.0)
    level = logging.getLevelName(ops.log_level.upper())
    level = level if isinstance(level, int) else logging.INFO
    if level > logging.DEBUG:
        # one "Handler 'lease_event' succeeded" line per Lease renewal is noise
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("k8slease").setLevel(level)  # under `kopf run` too: kopf's handlers


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod: the service account; elsewhere: ``$KUBECONFIG`` as it is now (kopf's default
    login via the kubernetes client reads the variable once, when that package is imported)."""
    info: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
    return info or kopf.login_with_kubeconfig(**kwargs)


def _runtime(memo: Any) -> OperatorRuntime | None:
    runtime = memo.get(RUNTIME_KEY) if hasattr(memo, "get") else None
    return runtime if isinstance(runtime, OperatorRuntime) else None


@kopf.on.startup()
async def start_operator(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ops = memo.get(SETTINGS_KEY)
    if not isinstance(ops, OperatorConfig):
        ops = OperatorConfig.from_env()
        memo[SETTINGS_KEY] = ops
    configure_kopf(settings, ops)
    runtime = OperatorRuntime(ops)
    await runtime.start()
    memo[RUNTIME_KEY] = runtime


@kopf.on.cleanup()
async def stop_operator(memo: kopf.Memo, **_: Any) -> None:
    runtime = _runtime(memo)
    if runtime is not None:
        await runtime.stop()


@kopf.on.probe(id="k8slease")
def operator_alive(memo: kopf.Memo, **_: Any) -> str:
    """Fails kopf's liveness endpoint (``--liveness``) while the write loop is dead or failing
    or the Lease handler fails (kube/supervise.py), so the kubelet restarts the operator."""
    runtime = _runtime(memo)
    if runtime is not None and not runtime.healthy():
        # permanent: kopf answers the probe at once with an error instead of retrying it
        raise kopf.PermanentError(f"k8slease operator unhealthy: {runtime.threads.down()}")
    return "ok"


@kopf.on.event(*LEASES, labels={LABEL_GROUP: kopf.PRESENT})
async def lease_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Every change of a k8slease Lease; observed only, never written."""
    runtime = _runtime(memo)
    if runtime is not None:
        runtime.on_lease(event.get("type"), event["object"])


@kopf.on.event(CRD_GROUP, CRD_VERSION, CRD_PLURAL)
async def group_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Every change of a ScheduledJobGroup: its spec, or its removal."""
    runtime = _runtime(memo)
    if runtime is not None:
        runtime.on_object(event.get("type"), event["object"])


async def pod_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Every change of a Pod of a group: the journals of its ended containers are merged."""
    runtime = _runtime(memo)
    if runtime is not None:
        runtime.on_pod(event["object"])


def read_journals_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``K8SLEASE_OPERATOR_READ_JOURNALS`` leaves journal reading on (the default)."""
    env = os.environ if environ is None else environ
    raw = env.get(f"{ENV_PREFIX}READ_JOURNALS", "true").strip().lower()
    return raw not in ("0", "false", "no", "off")


if read_journals_configured():
    kopf.on.event(*PODS, labels={LABEL_GROUP: kopf.PRESENT})(pod_event)
