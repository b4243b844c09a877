"""The informer's view of a group's job Leases, as the locks read it instead of a GET per tick.

The :class:`~k8slease.lease.informer.LeaseInformer` keeps :class:`Observations` current with one
list+watch per replica. A lock reads the Lease it is about to claim from there; while the
informer is not synced (starting, or its watch broke and it is listing again) the lock falls back
to reading the Lease (one GET), as it did before the cache existed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from k8slease.errors import ConfigError
from k8slease.jobs.claimorder import named_in, recent_members
from k8slease.lease.observe import Observation, Observations

#: Default seconds between the attempts of successive replicas in a tick's claim order.
DEFAULT_CLAIM_STEP = 0.5
#: Default cap on the rank that delays an attempt (the wait is at most ``spread * step``).
DEFAULT_CLAIM_SPREAD = 3
#: Seconds an identity stays a member after a write naming it was last seen.
MEMBER_WINDOW = 600.0


def check_claim_spacing(step: float, spread: int) -> None:
    """Raise ``ConfigError`` naming the option unless ``claim_step`` and ``claim_spread`` make
    sense: ``0 <= claim_step <= 60`` seconds and ``claim_spread`` an integer >= 1."""
    if isinstance(step, bool) or not isinstance(step, int | float) or not 0 <= step <= 60:
        raise ConfigError(f"claim_step must be between 0 and 60 seconds, got {step!r}")
    if isinstance(spread, bool) or not isinstance(spread, int) or spread < 1:
        raise ConfigError(f"claim_spread must be an integer >= 1, got {spread!r}")


@dataclass(eq=False)
class ClaimCache:
    """The group's job Leases as this replica's informer saw them, and the claim spacing.

    ``synced`` says whether the informer's view is current (listed, watch running). ``step`` and
    ``spread`` space the attempts (see :mod:`k8slease.jobs.claimorder`).
    """

    observations: Observations
    synced: Callable[[], bool]
    step: float = DEFAULT_CLAIM_STEP
    spread: int = DEFAULT_CLAIM_SPREAD
    window: float = MEMBER_WINDOW
    _last_seen: dict[str, float] = field(default_factory=dict, init=False)
    _mutex: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        check_claim_spacing(self.step, self.spread)
        self.observations.add_listener(self._named)
        for observation in self.observations.observed():
            self._named(observation)

    def _named(self, observation: Observation) -> None:
        """Remember who a newly seen Lease content names, and when it was seen."""
        if observation.view is None:
            return
        with self._mutex:
            for member in named_in(observation.view):
                seen = self._last_seen.get(member, observation.first_seen_at)
                self._last_seen[member] = max(seen, observation.first_seen_at)

    def usable(self) -> bool:
        """Whether claims may be judged from the cache (else: read the Lease)."""
        return self.synced()

    def members(self, now: float) -> frozenset[str]:
        """The identities named in a Lease content first seen within ``window`` seconds before
        ``now`` (monotonic)."""
        with self._mutex:
            return recent_members(self._last_seen, now=now, window=self.window)
