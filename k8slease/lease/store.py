"""Leases as decoded values: the typed layer every wing above ``lease/`` reads and writes through.

:class:`LeaseStore` wraps a :class:`~k8slease.lease.transport.LeaseAPI` (which speaks plain JSON
dicts, so that fields k8slease does not know survive) and decodes every Lease that comes back,
once, into a :class:`~k8slease.lease.view.LeaseView`. Each method sends exactly the one request
the transport method of the same name sends: wrapping changes no request sequence.

:meth:`LeaseStore.update` and :meth:`LeaseStore.create_new` take the edits (a record, a job
state) and write them into a view's ``body`` with the encoders of this package, so nothing above
``lease/`` parses or assembles a Lease by hand (the election machine, which is pure, builds the
bodies of its commands with the same encoders and the runner sends them through :meth:`create`
and :meth:`replace`). A Lease body that arrives by another road (the operator's kopf
handlers) is decoded by :func:`~k8slease.lease.view.received_lease`, the one decoder entry point
outside this class. ``tests/unit/test_lease_decoding_boundary.py`` checks both rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from k8slease.errors import NotFound
from k8slease.lease.jobrecord import JobState, lease_with_job_state
from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.transport import LeaseAPI
from k8slease.lease.view import LeaseView


@dataclass(frozen=True, slots=True)
class LeaseEvent:
    """One event of a Lease watch, decoded: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK
    (a bookmark's ``view`` carries only its resourceVersion)."""

    type: str
    view: LeaseView


class LeaseLister(Protocol):
    """A transport that can also list Leases (:class:`~k8slease.lease.transport.LeaseTransport`)."""

    def list(self, *, label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]: ...


class LeaseStore:
    """The Lease calls of one transport, answering :class:`LeaseView`s instead of dicts.

    Errors are the transport's, unchanged (``NotFound``, ``Conflict``, ``AlreadyExists``, ...),
    except :meth:`find`, which answers ``None`` for a Lease that does not exist.
    """

    __slots__ = ("api",)

    def __init__(self, api: LeaseAPI) -> None:
        self.api = api

    def get(self, name: str) -> LeaseView:
        """Read one Lease. Raises ``NotFound`` when it does not exist."""
        return LeaseView.decode(self.api.get(name))

    def find(self, name: str) -> LeaseView | None:
        """Read one Lease; ``None`` when it does not exist (one GET either way)."""
        try:
            return self.get(name)
        except NotFound:
            return None

    def create(self, body: Mapping[str, Any]) -> LeaseView:
        """Create a Lease from ``body``; the view of what the server stored."""
        return LeaseView.decode(self.api.create(body))

    def replace(self, name: str, body: Mapping[str, Any]) -> LeaseView:
        """PUT ``body``, conditional on its resourceVersion; the view of what the server stored."""
        return LeaseView.decode(self.api.replace(name, body))

    def update(
        self, name: str, view: LeaseView, *, record: LeaseRecord, state: JobState | None = None
    ) -> LeaseView:
        """PUT ``view``'s Lease with ``record`` (and ``state``, the job annotations) written in,
        conditional on the resourceVersion ``view`` was read at; every other field is kept."""
        body = lease_with_record(view.body, record)
        if state is not None:
            body = lease_with_job_state(body, state)
        return self.replace(name, body)

    def create_new(
        self,
        name: str,
        *,
        namespace: str,
        record: LeaseRecord,
        labels: Mapping[str, str],
        state: JobState | None = None,
    ) -> LeaseView:
        """Create the Lease ``name`` carrying ``record``, ``labels`` and ``state``."""
        body = new_lease(name, namespace, record, labels=labels)
        if state is not None:
            body = lease_with_job_state(body, state)
        return self.create(body)

    def watch(
        self, *, name: str, resource_version: str | None, timeout_seconds: int
    ) -> Iterator[LeaseEvent]:
        """The transport's watch of ``name``, each event's object decoded."""
        for event in self.api.watch(
            name=name, resource_version=resource_version, timeout_seconds=timeout_seconds
        ):
            yield LeaseEvent(type=event.type, view=LeaseView.decode(event.lease))

    def close_watches(self) -> None:
        """End every open watch of the transport now (see ``LeaseTransport.close_watches``)."""
        self.api.close_watches()


def list_leases(
    transport: LeaseLister, *, label_selector: str | None = None
) -> tuple[list[LeaseView], str]:
    """List Leases through ``transport``, decoded; also the list's resourceVersion."""
    items, version = transport.list(label_selector=label_selector)
    return [LeaseView.decode(item) for item in items], version
