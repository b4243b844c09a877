"""``Seams``: what a test (or an unusual integration) swaps inside a ``LeaderElector``.

The elector's keywords are what a user sets (the Lease, identity, timing, callbacks, metrics);
the three things only tests and custom integrations replace are grouped here and passed as one
keyword, ``LeaderElector(..., seams=Seams(clock=FakeClock()))``, so that they do not read as
settings. Not exported from :mod:`k8slease`: import it from here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from k8slease.clock import Clock
from k8slease.errors import ConfigError
from k8slease.lease.transport import LeaseAPI

__all__ = ["Seams"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Seams:
    """Replacements for the elector's clock, transport and random source (all optional).

    * ``clock`` [the system clock]: wall and monotonic time (``tests/support/fakeclock.py``);
    * ``transport`` [a ``LeaseTransport`` on the API client, made at start]: any
      :class:`~k8slease.lease.transport.LeaseAPI` (an in-memory store in unit tests);
    * ``rng`` [a fresh ``random.Random``]: the source of the retry jitter.
    """

    clock: Clock | None = None
    transport: LeaseAPI | None = None
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        if self.rng is not None and not isinstance(self.rng, random.Random):
            raise ConfigError(f"rng must be a random.Random, got {self.rng!r}")


#: no replacement: the elector's defaults
DEFAULT_SEAMS = Seams()
