"""The types of the elector's callbacks, so that ``mypy --strict`` checks what you pass.

Each callback may take its argument or nothing (as in client-go's and the official Python
client's examples), and may be a plain function or an ``async def`` (run as a task, cancelled
when the term ends):

* ``on_started_leading`` and ``on_stopped_leading``: a :data:`LeadershipCallback`, called with
  the term's :class:`~k8slease.LeadershipContext` or with nothing;
* ``on_new_leader``: a :data:`NewLeaderCallback`, called with the new holder's identity (``""``
  when nobody holds the Lease) or with nothing.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

from k8slease.election.leadership import LeadershipContext

__all__ = [
    "LeadershipCallback",
    "NewLeaderCallback",
    "OnLeadership",
    "OnNewLeader",
    "WithoutArgument",
]


class OnLeadership(Protocol):
    """``callback(ctx)``: told about a term (its context: Lease, identity, token, ``lost``)."""

    def __call__(self, ctx: LeadershipContext, /) -> object: ...


class OnNewLeader(Protocol):
    """``callback(identity)``: the observed holder changed (``""``: nobody holds the Lease)."""

    def __call__(self, identity: str, /) -> object: ...


class WithoutArgument(Protocol):
    """``callback()``: a callback that wants no argument."""

    def __call__(self) -> object: ...


LeadershipCallback: TypeAlias = OnLeadership | WithoutArgument
NewLeaderCallback: TypeAlias = OnNewLeader | WithoutArgument
