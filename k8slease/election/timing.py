"""Validated timing settings of a leader election, checked before anything runs.

The relations between the numbers are what makes the election safe, so they are enforced here
rather than documented and hoped for:

* ``renew_interval < renew_deadline < lease_duration``: the leader tries to renew several times
  before it gives up, and it gives up (``renew_deadline`` after the last successful renew was
  *sent*) strictly before any candidate may take over (``lease_duration`` after it first saw that
  renew's record). The difference is the margin that absorbs scheduling delays.
* ``lease_duration`` is written as ``leaseDurationSeconds``, an int32, so it must be a whole
  number of seconds, at least 1 and at most 2147483647
  (:data:`k8slease.kube.options.MAX_SECONDS`, the limit of every duration option, given or
  derived).
* ``request_timeout`` is shorter than the renew deadline; it bounds every connect and the
  release, while a renew may take the time left before its deadline
  (:mod:`k8slease.election.budgets`). A hung API server cannot keep a leader believing past the
  deadline either way: the watchdog ends leadership then, with the request still out.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from k8slease.errors import ConfigError
from k8slease.kube.options import check_at_most, seconds
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


#: The defaults, in the ratios every unset option is derived with (see :class:`ElectionTiming`).
DEFAULT_LEASE_DURATION = 60.0
DEFAULT_RETRY_INTERVAL = 5.0


def _given(value: float) -> str:
    return f"{value:g}s, as given"


@dataclass(frozen=True, slots=True, init=False)
class ElectionTiming:
    """The timing of one elector, validated on construction (raises ``ConfigError``).

    ``lease_duration`` (default 60 s) is written to the Lease; candidates wait that long after
    they first saw a record unchanged before they take over. ``renew_interval`` (20 s) is how
    often the leader renews. ``renew_deadline`` (40 s) is how long after the last successful
    renew was sent the leader gives up. ``retry_interval`` (5 s) is how often candidates poll
    when no watch is possible (jittered) and, capped, the pause between failed renewals.
    ``request_timeout`` bounds every connect and the release (other requests have budgets from
    what is at stake, :mod:`k8slease.election.budgets`); by default ``min(10, renew_deadline / 3)``.

    Options left unset follow from the ones given, in the default ratios (60/20/40/5), so any
    valid subset works: ``lease_duration`` alone gives ``renew_deadline = 2/3`` and
    ``renew_interval = 1/3`` of it; a given ``renew_deadline`` sets ``renew_interval`` to half
    of it and, when unset, ``lease_duration`` to 1.5 times it (whole seconds, at least 1 s
    more); a given ``renew_interval`` alone sets the lease to 3 times it; ``retry_interval`` is
    ``min(5, lease_duration / 12)``. client-go's ``15/10/2`` (lease, deadline, retry) is
    accepted as is. Every duration, given or derived, is at most 2147483647 s
    (``leaseDurationSeconds`` is an int32). An error names the options the user wrote and how the
    others were derived.
    """

    lease_duration: float
    renew_interval: float
    renew_deadline: float
    retry_interval: float
    request_timeout: float | None

    def __init__(
        self,
        *,
        lease_duration: float | None = None,
        renew_interval: float | None = None,
        renew_deadline: float | None = None,
        retry_interval: float | None = None,
        request_timeout: float | None = None,
    ) -> None:
        given_duration = (
            None if lease_duration is None else _positive("lease_duration", lease_duration)
        )
        given_interval = (
            None if renew_interval is None else _positive("renew_interval", renew_interval)
        )
        given_deadline = (
            None if renew_deadline is None else _positive("renew_deadline", renew_deadline)
        )
        given_retry = (
            None if retry_interval is None else _positive("retry_interval", retry_interval)
        )
        if given_duration is not None and (given_duration != int(given_duration)):
            raise ConfigError(
                f"lease_duration must be a whole number of seconds >= 1 (it is written as"
                f" leaseDurationSeconds), got {lease_duration!r}"
            )
        # how each value came about, for the error messages
        said: dict[str, str] = {}
        if given_duration is not None:
            duration = given_duration
            said["lease_duration"] = _given(duration)
        elif given_deadline is not None:
            duration = float(max(math.ceil(given_deadline * 1.5), math.floor(given_deadline) + 1))
            said["lease_duration"] = f"{duration:g}s, derived from renew_deadline"
        elif given_interval is not None:
            duration = float(max(math.ceil(given_interval * 3), 1))
            said["lease_duration"] = f"{duration:g}s, derived from renew_interval"
        else:
            duration = DEFAULT_LEASE_DURATION
            said["lease_duration"] = f"{duration:g}s, the default"
        if given_deadline is not None:
            deadline = given_deadline
            said["renew_deadline"] = _given(deadline)
        elif given_interval is not None:
            deadline = max(duration * 2 / 3, (given_interval + duration) / 2)
            said["renew_deadline"] = (
                f"{deadline:g}s, derived from lease_duration and renew_interval"
            )
        else:
            deadline = duration * 2 / 3
            said["renew_deadline"] = f"{deadline:g}s, derived from lease_duration"
        if given_interval is not None:
            interval = given_interval
            said["renew_interval"] = _given(interval)
        else:
            interval = deadline / 2
            said["renew_interval"] = f"{interval:g}s, derived from renew_deadline"
        retry = (
            given_retry if given_retry is not None else min(DEFAULT_RETRY_INTERVAL, duration / 12)
        )
        # a derived lease may overshoot where the option given did not: it is written too
        check_at_most("lease_duration", duration, given=said["lease_duration"])
        if duration < 1:
            raise ConfigError(
                f"lease_duration must be a whole number of seconds >= 1 (it is written as"
                f" leaseDurationSeconds), got {lease_duration!r}"
            )
        if given_deadline is None and not interval < duration:  # say it with what was given
            raise ConfigError(
                f"renew_interval ({said['renew_interval']}) must be shorter than lease_duration"
                f" ({said['lease_duration']}): the leader renews several times per lease"
            )
        if not interval < deadline:
            raise ConfigError(
                f"renew_interval ({said['renew_interval']}) must be shorter than renew_deadline"
                f" ({said['renew_deadline']}): the leader must get at least one renew in before"
                " it gives up"
            )
        if not deadline < duration:
            raise ConfigError(
                f"renew_deadline ({said['renew_deadline']}) must be shorter than lease_duration"
                f" ({said['lease_duration']}): a leader must stop before anyone else may take"
                " over"
            )
        timeout = request_timeout
        if timeout is None:
            timeout = min(10.0, deadline / 3.0)
        timeout = _positive("request_timeout", timeout)
        if not timeout < deadline:
            raise ConfigError(
                f"request_timeout ({timeout:g}s) must be shorter than renew_deadline"
                f" ({said['renew_deadline']})"
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


def one_timing(timing: ElectionTiming | None, **loose: float | None) -> ElectionTiming:
    """The one timing of an elector: ``timing`` as it is (validated once, where it was built),
    or an :class:`ElectionTiming` built from the loose keywords (``lease_duration=`` and the
    others :class:`ElectionTiming` takes, ``None`` when unset); ``ConfigError`` for both."""
    if timing is None:
        return ElectionTiming(**loose)
    if not isinstance(timing, ElectionTiming):
        raise ConfigError(f"timing must be an ElectionTiming, got {timing!r}")
    if given := sorted(key for key, value in loose.items() if value is not None):
        keywords = ", ".join(f"{key}=" for key in given)
        raise ConfigError(
            f"pass the timing either as timing= or as {keywords}, not both"
            " (the keywords build an ElectionTiming)"
        )
    return timing


def with_request_timeout(
    timing: ElectionTiming | None, request_timeout: float | None, *, what: str = "election"
) -> ElectionTiming:
    """The one timing of a group whose requests all share ``request_timeout``: ``timing`` as it
    is, or the default timing with ``request_timeout`` when no ``timing`` is given.

    Both given is accepted only when they agree (``ConfigError`` otherwise, naming both): a
    group has one request timeout, the timing's, so that it cannot be set two ways.
    """
    if timing is None:
        return ElectionTiming(request_timeout=request_timeout)
    if not isinstance(timing, ElectionTiming):
        raise ConfigError(f"{what} must be an ElectionTiming, got {timing!r}")
    if request_timeout is not None:
        given = _positive("request_timeout", request_timeout)
        if given != timing.timeout:
            raise ConfigError(
                f"request_timeout={given:g} differs from {what}.request_timeout"
                f" ({timing.timeout:g}s): pass it once, as"
                f" {what}=ElectionTiming(..., request_timeout={given:g})"
            )
    return timing
