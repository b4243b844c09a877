"""Kubernetes Events that replicas post about the Leases they hold (for failed job runs).

Events are best effort: a failure to post one is logged and never fails the job or the lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client

from k8slease.clock import Clock, SystemClock
from k8slease.errors import TransportError
from k8slease.kube.microtime import format_microtime
from k8slease.kube.rawapi import send_json
from k8slease.logs import get_logger

log = get_logger("k8slease.events")


class EventRecorder:
    """Posts core/v1 Events about objects in one namespace.

    ``component`` is the Event's reporting component; ``identity`` names this replica as the
    reporting instance. ``request_timeout`` (seconds) bounds each post.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        *,
        component: str = "k8slease",
        identity: str = "",
        request_timeout: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        self._api_client = api_client
        self._path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
        self.namespace = namespace
        self.component = component
        self.identity = identity
        self.request_timeout = request_timeout
        self._clock = clock or SystemClock()

    def post(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        type_: str = "Normal",
        action: str = "",
    ) -> bool:
        """Post one Event about ``involved`` (an object body): stamped now, with a name of its
        own (a resend of the same body after a timeout is answered ``AlreadyExists`` if the first
        landed); returns whether it was accepted (how is :meth:`deliver`'s: here now, waiting
        for the answer)."""
        metadata = involved.get("metadata") or {}
        name = str(metadata.get("name", "unknown"))
        now = self._clock.now()
        return self.deliver(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{name}.{uuid.uuid4().hex[:16]}",
                    "namespace": self.namespace,
                },
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion", ""),
                    "kind": involved.get("kind", ""),
                    "name": name,
                    "namespace": self.namespace,
                    "uid": metadata.get("uid", ""),
                    "resourceVersion": metadata.get("resourceVersion", ""),
                },
                "reason": reason,
                "message": message[:1024],
                "type": type_,
                "action": action or reason,
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.identity,
                "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "eventTime": format_microtime(now),
                "count": 1,
            }
        )

    def deliver(self, body: dict[str, Any]) -> bool:
        """Send the Event ``body`` now, waiting for the answer; whether it was created (a
        failure is logged, never raised). A queue overrides this to send it later."""
        reason = body["reason"]
        try:
            self.send_body(body, timeout=self.request_timeout)
        except TransportError as exc:
            log.warning(
                "event.post_failed", reason=reason, object=_object_name(body), error=str(exc)
            )
            return False
        return True

    def send_body(self, body: Mapping[str, Any], *, timeout: float | urllib3.Timeout) -> None:
        """Create the Event ``body``, the request bounded by ``timeout``; raises
        :class:`~k8slease.errors.TransportError` when it was not created."""
        send_json(
            self._api_client, "create", "POST", self._path, kind="Event", body=body, timeout=timeout
        )


def _object_name(body: Mapping[str, Any]) -> str:
    return str(body["involvedObject"]["name"])
