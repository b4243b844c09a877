"""Keep this replica's observations of a group's job Leases current with one list+watch.

Expiry is judged by how long *this* process has seen a Lease unchanged. A replica that only read
a job's Lease when its scheduler fired would, after a holder crashed, first see the crashed
holder's last write at the next tick and could take over only a tick later. The informer watches
the group's Leases (one connection per replica, no polling), so when the next tick comes the
replica already knows how long the Lease has been unchanged and takes over at once.
"""

from __future__ import annotations

import random
import threading
from dataclasses import KW_ONLY, dataclass, field

from k8slease.errors import TransportError
from k8slease.kube.complaints import RepeatedErrors
from k8slease.kube.supervise import ThreadHealth
from k8slease.lease.meta import lease_name_of, resource_version
from k8slease.lease.observe import Observations
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.logs import get_logger

log = get_logger("k8slease.informer")


@dataclass(eq=False)
class LeaseInformer:
    """Feeds ``observations`` from a list+watch of the Leases matching ``label_selector``.

    ``synced`` is set while the view is current (listed, then watching) and cleared when the
    list or watch fails, so that readers fall back to reading the Lease. ``retry_interval``
    (seconds, default 5, jittered) is how long to wait before listing again after the API server
    failed; ``watch_timeout`` (seconds, default 300) is how long one watch request lasts before
    it is renewed.
    """

    transport: LeaseTransport
    observations: Observations
    _: KW_ONLY
    label_selector: str
    retry_interval: float = 5.0
    watch_timeout: int = 300
    synced: threading.Event = field(default_factory=threading.Event, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    #: Down while the loop has crashed and not listed again (``Jobs.healthy`` reads it).
    threads: ThreadHealth = field(default_factory=ThreadHealth, init=False)

    def __post_init__(self) -> None:
        self._log = log.bind(selector=self.label_selector, namespace=self.transport.namespace)
        self._errors = RepeatedErrors(self._log, namespace=self.transport.namespace)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="k8slease-informer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current watch request ends (it is abandoned, not awaited)."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                items, version = self.transport.list(label_selector=self.label_selector)
                self._errors.succeeded("list")
                self.threads.recovered("informer", log=self._log)
                for lease in items:
                    self._see(lease)
                self.synced.set()
                while not self._stop.is_set():
                    for event in self.transport.watch(
                        label_selector=self.label_selector,
                        resource_version=version,
                        timeout_seconds=self.watch_timeout,
                    ):
                        if self._stop.is_set():
                            return
                        version = resource_version(event.lease)
                        if event.type == "DELETED":
                            # seen absent, not forgotten: the observer keeps the highest token
                            # and claimed tick, and a Lease deleted while held is waited out
                            self._see_event(event.lease, version, absent=True)
                        elif event.type in ("ADDED", "MODIFIED"):
                            self._see_event(event.lease, version)
            except TransportError as exc:
                self.synced.clear()  # until listed again, the view may miss writes
                if self._stop.is_set():
                    return
                if exc.status == 410:
                    self._log.debug("informer.relist", why="expired")
                    continue
                self._errors.failed("list", exc)  # once with a hint, then counted
                self._stop.wait(self.retry_interval * random.uniform(0.8, 1.2))
            except Exception as exc:  # never let the informer thread die silently
                self.synced.clear()
                self.threads.crashed("informer", exc, log=self._log, for_good=False)
                self._stop.wait(self.retry_interval)

    def _see(self, lease: dict[str, object]) -> None:
        """A listed Lease: the answer to a read, newer than anything this replica wrote before
        the list was sent."""
        name = lease_name_of(lease)
        if name:
            self.observations.see(name, LeaseView.decode(lease))

    def _see_event(self, lease: dict[str, object], version: str, *, absent: bool = False) -> None:
        """A watch event at ``version``: dropped when late (:meth:`Observations.see_event`)."""
        name = lease_name_of(lease)
        if name:
            view = None if absent else LeaseView.decode(lease)
            self.observations.see_event(name, view, version=version)
