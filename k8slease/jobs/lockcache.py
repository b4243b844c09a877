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
from k8slease.jobs.claimorder import members_of
from k8slease.lease.observe import Observations

#: Default seconds between the attempts of successive replicas in a tick's claim order.
DEFAULT_CLAIM_STEP = 0.5
#: Default cap on the rank that delays an attempt (the wait is at most ``spread * step``).
DEFAULT_CLAIM_SPREAD = 3


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
    _members: frozenset[str] = field(default=frozenset(), init=False)
    _members_at: int = field(default=-1, init=False)
    _mutex: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        check_claim_spacing(self.step, self.spread)

    def usable(self) -> bool:
        """Whether claims may be judged from the cache (else: read the Lease)."""
        return self.synced()

    def members(self) -> frozenset[str]:
        """The identities the group's job Leases name (recomputed only after a change)."""
        generation = self.observations.generation
        with self._mutex:
            if generation != self._members_at:
                self._members = members_of(self.observations.views())
                self._members_at = generation
            return self._members
