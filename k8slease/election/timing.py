"""Validated timing settings of a leader election, checked before anything runs.

The relations between the numbers are what makes the election safe, so they are enforced here
rather than documented and hoped for:

* ``renew_interval < renew_deadline < lease_duration``: the leader tries to renew several times
  before it gives up, and it gives up (``renew_deadline`` after the last successful renew was
  *sent*) strictly before any candidate may take over (``lease_duration`` after it first saw that
  renew's record). The difference is the margin that absorbs scheduling delays.
* ``lease_duration`` is written as ``leaseDurationSeconds``, an integer, so it must be a whole
  number of seconds, at least 1.
* ``request_timeout`` is shorter than the renew deadline; it bounds every connect and the
  release, while a renew may take the time left before its deadline
  (:mod:`k8slease.election.budget`). A hung API server cannot keep a leader believing past the
  deadline either way: the watchdog ends leadership then, with the request still out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from k8slease.errors import ConfigError
from k8slease.kube.options import seconds
from k8slease.logs import get_logger

_log = get_logger("k8slease.timing")


#: client-go compares renewTime at whole seconds: peers sharing a Lease need more margin.
WHOLE_SECOND_MARGIN = 1.0

_warned: set[tuple[float, float]] = set()
_warned_lock = threading.Lock()


def _positive(name: str, value: object) -> float:
    return seconds(name, value, above=True)


def _warn_thin_margin(duration: float, deadline: float) -> None:
    """Log once per process and setting when ``lease_duration - renew_deadline <= 1 s``."""
    if duration - deadline > WHOLE_SECOND_MARGIN:
        return
    with _warned_lock:
        if (duration, deadline) in _warned:
            return
        _warned.add((duration, deadline))
    _log.warning(
        "timing.thin_margin",
        lease_duration=duration,
        renew_deadline=deadline,
        margin=duration - deadline,
        hint=(
            "client-go peers sharing the Lease judge renewTime at whole seconds: keep"
            " lease_duration - renew_deadline above 1 s (docs/operations.md)"
        ),
    )


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    """The timing of one elector, validated on construction (raises ``ConfigError``).

    ``lease_duration`` (default 60 s) is written to the Lease; candidates wait that long after
    they first saw a record unchanged before they take over. ``renew_interval`` (20 s) is how
    often the leader renews. ``renew_deadline`` (40 s) is how long after the last successful
    renew was sent the leader gives up. ``retry_interval`` (5 s) is how often candidates poll
    when no watch is possible (jittered) and, capped, the pause between failed renewals.
    ``request_timeout`` bounds every connect and the release (other requests have budgets from
    what is at stake, :mod:`k8slease.election.budget`); by default ``min(10, renew_deadline / 3)``.
    """

    lease_duration: float = 60.0
    renew_interval: float = 20.0
    renew_deadline: float = 40.0
    retry_interval: float = 5.0
    request_timeout: float | None = field(default=None)

    def __post_init__(self) -> None:
        duration = _positive("lease_duration", self.lease_duration)
        interval = _positive("renew_interval", self.renew_interval)
        deadline = _positive("renew_deadline", self.renew_deadline)
        retry = _positive("retry_interval", self.retry_interval)
        if duration != int(duration) or duration < 1:
            raise ConfigError(
                f"lease_duration must be a whole number of seconds >= 1 (it is written as"
                f" leaseDurationSeconds), got {self.lease_duration!r}"
            )
        if not interval < deadline:
            raise ConfigError(
                f"renew_interval ({interval:g}s) must be shorter than renew_deadline"
                f" ({deadline:g}s): the leader must get at least one renew in before it gives up"
            )
        if not deadline < duration:
            raise ConfigError(
                f"renew_deadline ({deadline:g}s) must be shorter than lease_duration"
                f" ({duration:g}s): a leader must stop before anyone else may take over"
            )
        timeout = self.request_timeout
        if timeout is None:
            timeout = min(10.0, deadline / 3.0)
        timeout = _positive("request_timeout", timeout)
        if not timeout < deadline:
            raise ConfigError(
                f"request_timeout ({timeout:g}s) must be shorter than renew_deadline"
                f" ({deadline:g}s)"
            )
        _warn_thin_margin(duration, deadline)
        object.__setattr__(self, "lease_duration", duration)
        object.__setattr__(self, "renew_interval", interval)
        object.__setattr__(self, "renew_deadline", deadline)
        object.__setattr__(self, "retry_interval", retry)
        object.__setattr__(self, "request_timeout", timeout)

    @property
    def lease_duration_seconds(self) -> int:
        """``lease_duration`` as the integer written to ``leaseDurationSeconds``."""
        return int(self.lease_duration)

    @property
    def timeout(self) -> float:
        """The resolved request timeout in seconds."""
        assert self.request_timeout is not None
        return self.request_timeout

    @property
    def renew_retry_interval(self) -> float:
        """The pause between failed renewals: short enough for several tries before the deadline."""
        spare = self.renew_deadline - self.renew_interval
        return min(self.retry_interval, max(0.02, spare / 4.0))
