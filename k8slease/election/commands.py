"""What the election machine asks the runner to do (commands) and what it reports (events).

The vocabulary between :class:`~k8slease.election.machine.ElectionMachine` and the code that runs
it (:mod:`k8slease.election.threads` against the API server, the property tests against an
in-memory store): commands are requests to make or a time to wait until; events are the
leadership changes the callbacks hear about.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from k8slease.lease.record import LeaseRecord


class Phase(Enum):
    """Where the machine is in its life."""

    CANDIDATE = "candidate"
    LEADER = "leader"
    RELEASING = "releasing"
    STOPPED = "stopped"


class Purpose(Enum):
    """Why a request is made."""

    OBSERVE = "observe"  # a candidate reads the Lease
    REREAD = "reread"  # a leader re-reads after a Conflict
    RELEASE_READ = "release-read"  # the fresh read before a release
    CREATE = "create"
    TAKE = "take"
    RENEW = "renew"
    RELEASE = "release"


# -- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Read:
    """GET the Lease; report with ``read_done`` (``None`` on NotFound) or ``read_failed``."""

    purpose: Purpose


@dataclass(frozen=True, slots=True)
class Create:
    """Create the Lease from ``body``; report with ``write_done`` or ``write_failed``."""

    body: dict[str, Any]
    purpose: Purpose = Purpose.CREATE


@dataclass(frozen=True, slots=True)
class Update:
    """PUT ``body`` (conditional on its resourceVersion); report like :class:`Create`."""

    body: dict[str, Any]
    purpose: Purpose


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to do until monotonic time ``until`` (``None``: until an event) or an event."""

    until: float | None


@dataclass(frozen=True, slots=True)
class Done:
    """The machine has stopped; nothing more will happen."""


Command = Read | Create | Update | Wait | Done


# -- events ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartedLeading:
    """This replica leads from now: ``term`` counts its grants, ``fencing_token`` is the Lease's."""

    term: int
    fencing_token: int
    record: LeaseRecord


@dataclass(frozen=True, slots=True)
class StoppedLeading:
    """This replica no longer leads (belief ended at this event); ``reason`` says why."""

    term: int
    fencing_token: int
    reason: str
    #: When belief would have ended at the latest (last successful send + renew deadline).
    leading_until: float


@dataclass(frozen=True, slots=True)
class NewLeader:
    """The observed holder changed; ``holder`` is empty when nobody holds the Lease."""

    holder: str
    fencing_token: int


@dataclass(frozen=True, slots=True)
class Released:
    """The release was written: candidates may take the Lease at once."""

    fencing_token: int


Event = StartedLeading | StoppedLeading | NewLeader | Released
