"""What ``on_started_leading`` and ``on_stopped_leading`` receive about one term."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from k8slease.callbacks import CancelHooks


@dataclass(eq=False)
class LeadershipContext:
    """What ``on_started_leading`` (and ``on_stopped_leading``) receive about one term.

    ``lost`` is set the moment leadership ends (renew deadline passed, Lease taken, stop); work
    must stop then. Coroutine callbacks are also cancelled. ``fencing_token`` grows with every
    grant of the Lease: pass it to systems you write to so they can reject a stale leader.
    ``term`` counts this elector's grants (1, 2, ...).
    """

    lease_name: str
    namespace: str
    identity: str
    fencing_token: int
    term: int
    lost: threading.Event = field(default_factory=threading.Event)
    cancel_hooks: CancelHooks = field(default_factory=CancelHooks, repr=False)

    def mark_lost(self) -> None:
        """End the term: set ``lost`` and run the hooks (the elector calls this)."""
        self.lost.set()
        self.cancel_hooks.fire()
