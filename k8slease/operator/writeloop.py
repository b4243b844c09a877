"""The operator's write loop: turns the registry's plan into API calls.

The kopf handlers only feed watch events into the :class:`~k8slease.operator.groups.Registry`
(they never write; the operator's one Lease write, a journal's merge, is
:mod:`~k8slease.operator.podjournals`'s). One asyncio task wakes up when something changed,
waits ``flush_interval`` to let a burst of events coalesce, asks the registry what to do and
runs the calls with at most ``max_concurrency`` in flight. API calls go through the
kubernetes client in worker threads, each with a timeout.

Observation times come from :meth:`OperatorRuntime.observed_now`: the wall time at start plus
the monotonic time elapsed since, so that the registry's judgments ("seen unchanged for the
lease duration", gaps) cannot be bent by a jump of this machine's wall clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from k8slease.clock import Clock, SystemClock
from k8slease.election.budgets import event_budget
from k8slease.election.timing import ElectionTiming
from k8slease.kube.apiclient import default_api_client
from k8slease.kube.eventqueue import QueuedEvents
from k8slease.kube.supervise import ThreadHealth
from k8slease.lease.store import LeaseStore
from k8slease.lease.transport import LeaseTransport
from k8slease.logs import get_logger
from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION
from k8slease.operator.groups import (
    Action,
    CreateObject,
    PatchStatus,
    PostEvent,
    Registry,
)
from k8slease.operator.podjournals import JournalMerger
from k8slease.operator.settings import OperatorConfig

log = get_logger("k8slease.operator")

MERGE_PATCH = "application/merge-patch+json"


class OperatorRuntime:
    """Registry + write loop. ``api_client`` defaults to in-cluster or kubeconfig configuration."""

    def __init__(
        self,
        settings: OperatorConfig,
        *,
        api_client: client.ApiClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self._anchor_wall = self.clock.now()
        self._anchor_mono = self.clock.monotonic()
        self.registry = Registry(settings)
        self._api_client = api_client
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._recorders: dict[str, QueuedEvents] = {}
        #: Calls made, by kind ("patch", "create", "event") and outcome ("ok", "error").
        self.calls: Counter[str] = Counter()
        #: The write loop and the Lease handler while they fail (kopf's liveness probe reads it).
        self.threads = ThreadHealth()
        self._stores: dict[str, LeaseStore] = {}
        #: merges ended replicas' journals into their job Leases (``read_journals``)
        self.journals: JournalMerger | None = (
            JournalMerger(self._store, settings, now=self.clock) if settings.read_journals else None
        )

    @property
    def api_client(self) -> client.ApiClient:
        if self._api_client is None:
            # $KUBECONFIG is read now: the kubernetes package reads it once, at import time.
            kubeconfig = self.settings.kubeconfig or os.environ.get("KUBECONFIG") or None
            self._api_client = default_api_client(kubeconfig=kubeconfig)
        return self._api_client

    def _store(self, namespace: str) -> LeaseStore:
        """The Leases of ``namespace`` (for merging journals: the only Lease writes)."""
        store = self._stores.get(namespace)
        if store is None:
            transport = LeaseTransport(
                self.api_client, namespace, request_timeout=self.settings.request_timeout
            )
            store = self._stores[namespace] = LeaseStore(transport)
        return store

    def observed_now(self) -> datetime:
        """Now, as the wall time at start plus the monotonic time elapsed since."""
        elapsed = self.clock.monotonic() - self._anchor_mono
        return self._anchor_wall + timedelta(seconds=elapsed)

    # -- input from the kopf handlers ------------------------------------------------------------

    def on_lease(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        try:
            changed = self.registry.on_lease(event_type, body, self.observed_now())
        except Exception as exc:
            # down until a Lease event is folded again: the liveness probe fails meanwhile
            self.threads.crashed("lease-handler", exc, log=log, for_good=False)
            raise
        self.threads.recovered("lease-handler", log=log)
        if changed is not None:
            self._wake.set()

    def on_pod(self, body: Mapping[str, Any]) -> None:
        """A Pod of a group changed: merge the journals its ended containers left."""
        if self.journals is not None:
            self.journals.on_pod(body)

    def healthy(self) -> bool:
        """False while the write loop is dead or failing, or the Lease handler fails (for
        kopf's liveness probe, ``--liveness``)."""
        task = self._task
        return task is not None and not task.done() and self.threads.healthy()

    def on_object(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        if self.registry.on_object(event_type, body, self.observed_now()) is not None:
            self._wake.set()

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        _ = self.api_client  # fail early on a bad configuration
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="k8slease-operator-writer")

    async def stop(self) -> None:
        if self.journals is not None:
            await self.journals.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        settings = self.settings
        semaphore = asyncio.Semaphore(settings.max_concurrency)
        while True:
            timeout = settings.flush_interval if self.registry.dirty else settings.evaluate_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            await asyncio.sleep(settings.flush_interval)  # let a burst of events coalesce
            try:
                actions = self.registry.plan(self.observed_now(), self.clock.monotonic())
            except Exception as exc:
                # restarted after evaluate_interval; unhealthy until a plan succeeds
                self.threads.crashed(
                    "writer", exc, log=log, for_good=False, event="operator.plan_failed"
                )
                await asyncio.sleep(settings.evaluate_interval)
                continue
            self.threads.recovered("writer", log=log)
            if actions:
                await self._execute(actions, semaphore)

    async def _execute(self, actions: list[Action], semaphore: asyncio.Semaphore) -> None:
        """Run writes concurrently; a group's Events one after the other, in order."""
        events: dict[tuple[str, str], list[Action]] = {}
        others: list[Action] = []
        for action in actions:
            if isinstance(action, PostEvent):
                events.setdefault(action.key, []).append(action)
            else:
                others.append(action)

        async def in_order(batch: list[Action]) -> None:
            for action in batch:
                await self._run(action, semaphore)

        await asyncio.gather(
            *(self._run(action, semaphore) for action in others),
            *(in_order(batch) for batch in events.values()),
        )

    async def _run(self, action: Action, semaphore: asyncio.Semaphore) -> None:
        async with semaphore:
            try:
                if isinstance(action, PatchStatus):
                    await asyncio.to_thread(self._patch, action)
                elif isinstance(action, CreateObject):
                    await asyncio.to_thread(self._create, action)
                else:
                    await asyncio.to_thread(self._event, action)
            except Exception:  # one failed call must never stop the loop
                log.exception("operator.action_failed", action=type(action).__name__)

    # -- calls (in worker threads) ---------------------------------------------------------------

    def _call(
        self, method: Callable[..., object], namespace: str, *args: object, **kw: object
    ) -> None:
        """``method`` of ``CustomObjectsApi`` on the ScheduledJobGroups of ``namespace``."""
        method(
            CRD_GROUP,
            CRD_VERSION,
            namespace,
            CRD_PLURAL,
            *args,
            _preload_content=False,
            _request_timeout=self.settings.request_timeout,
            **kw,
        )

    def _patch(self, action: PatchStatus) -> None:
        namespace, name = action.key
        api = client.CustomObjectsApi(self.api_client)
        try:
            self._call(
                api.patch_namespaced_custom_object_status,
                namespace,
                name,
                {"status": action.patch},
                _content_type=MERGE_PATCH,
            )
        except ApiException as exc:
            self.calls["patch.error"] += 1
            gone = exc.status == 404
            self.registry.write_failed(action, self.clock.monotonic(), gone=gone)
            log.warning(
                "operator.status_write_failed",
                namespace=namespace,
                group=name,
                status=exc.status,
                reason=exc.reason,
            )
            return
        except Exception as exc:
            self.calls["patch.error"] += 1
            self.registry.write_failed(action, self.clock.monotonic())
            log.warning("operator.status_write_failed", namespace=namespace, group=name, error=exc)
            return
        self.calls["patch.ok"] += 1
        self.registry.written(action, self.clock.monotonic())
        log.debug(
            "operator.status_written", namespace=namespace, group=name, fields=len(action.patch)
        )

    def _create(self, action: CreateObject) -> None:
        namespace, name = action.key
        api = client.CustomObjectsApi(self.api_client)
        try:
            self._call(api.create_namespaced_custom_object, namespace, action.body)
        except ApiException as exc:
            self.calls["create.error"] += 1
            exists = exc.status == 409
            self.registry.create_failed(action, exists=exists)
            if not exists:
                log.warning(
                    "operator.create_failed", namespace=namespace, group=name, status=exc.status
                )
            return
        except Exception as exc:
            self.calls["create.error"] += 1
            self.registry.create_failed(action, exists=False)
            log.warning("operator.create_failed", namespace=namespace, group=name, error=exc)
            return
        self.calls["create.ok"] += 1
        log.info("operator.group_created", namespace=namespace, group=name)

    def _event(self, action: PostEvent) -> None:
        namespace = action.key[0]
        recorder = self._recorders.get(namespace)
        if recorder is None:
            # queued, so a slow server delays no status write; each post may take what the
            # default election timings tolerate (the operator does not know the replicas')
            recorder = self._recorders[namespace] = QueuedEvents(
                self.api_client,
                namespace,
                component=self.settings.event_component,
                identity=self.settings.event_component,
                bound=max(self.settings.request_timeout, event_budget(ElectionTiming())),
                connect=self.settings.request_timeout,
                clock=self.clock,
            )
        involved = {
            "apiVersion": action.involved["apiVersion"],
            "kind": action.involved["kind"],
            "metadata": {"name": action.involved["name"], "uid": action.involved["uid"]},
        }
        ok = recorder.post(
            involved,
            reason=action.notice.reason,
            message=action.notice.message,
            type_=action.notice.type,
        )
        self.calls["event.queued" if ok else "event.dropped"] += 1
        log.info(
            "operator.event",
            namespace=namespace,
            group=action.key[1],
            type=action.notice.type,
            reason=action.notice.reason,
            message=action.notice.message,
        )
