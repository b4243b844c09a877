"""Validate option values where they are given: numbers of seconds, flags, enum members.

Every error is a :class:`~k8slease.errors.ConfigError` that names the option and says what is
accepted, so a bad value fails when the app starts (or a module is imported), not when a job
first fires.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import TypeVar

from k8slease.errors import ConfigError

E = TypeVar("E", bound=Enum)

#: The longest duration k8slease takes, in seconds (about 68 years): a Lease's
#: ``leaseDurationSeconds`` is an int32, and every duration option either ends up there (a lease
#: duration, a lock time) or bounds a wait or a socket timeout, where a larger number overflows.
MAX_SECONDS = 2_147_483_647
#: Why :data:`MAX_SECONDS`, said in the errors.
MAX_SECONDS_WHY = "k8slease's limit for every duration: a Lease's leaseDurationSeconds is an int32"


def seconds(
    name: str,
    value: object,
    *,
    minimum: float = 0.0,
    above: bool = False,
    maximum: float = MAX_SECONDS,
    prefix: str = "",
) -> float:
    """``value`` as float seconds: a finite number (not a bool) ``>= minimum`` (``> minimum``
    when ``above``) and ``<= maximum`` (by default :data:`MAX_SECONDS`, the limit of every
    duration)."""
    low = f"> {minimum:g}" if above else f">= {minimum:g}"
    wanted = f"a finite number of seconds {low}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{prefix}{name} must be {wanted}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{prefix}{name} must be {wanted}, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float: far above the limit
        number = math.inf
    if number <= minimum if above else number < minimum:
        raise ConfigError(f"{prefix}{name} must be {wanted}, got {value!r}")
    check_at_most(name, number, maximum, given=value, prefix=prefix)
    return number


def check_at_most(
    name: str, number: float, maximum: float = MAX_SECONDS, *, given: object, prefix: str = ""
) -> None:
    """Raise ``ConfigError`` naming ``name`` and the limit when ``number`` (seconds) is above
    ``maximum``; ``given`` is what the user wrote, or how the value came about."""
    if number > maximum:
        why = f" ({MAX_SECONDS_WHY})" if maximum == MAX_SECONDS else ""
        shown = given if isinstance(given, str) else repr(given)
        raise ConfigError(
            f"{prefix}{name} must be at most {maximum:.10g} seconds{why}, got {shown}"
        )


def flag(name: str, value: object, *, prefix: str = "") -> bool:
    """``value`` if it is a bool (``True``/``False``), else a ConfigError."""
    if not isinstance(value, bool):
        raise ConfigError(f"{prefix}{name} must be True or False, got {value!r}")
    return value


def member(name: str, value: object, enum: type[E], *, prefix: str = "") -> E:
    """``value`` as a member of ``enum``: the member itself, or its value or name as a string
    (any case; ``-`` and ``_`` alike), e.g. ``"skip"``, ``"RUN_ALL"``, ``"run-all"``."""
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        wanted = value.strip().lower().replace("_", "-")
        for candidate in enum:
            names = (str(candidate.value).lower().replace("_", "-"), candidate.name.lower())
            if wanted in names or wanted.replace("-", "_") in names:
                return candidate
    accepted = ", ".join(f"{enum.__name__}.{m.name} or {str(m.value)!r}" for m in enum)
    raise ConfigError(f"{prefix}{name} must be one of {accepted}; got {value!r}")


def port(name: str, value: object) -> int:
    """A TCP port: an int from 0 (any free port) to 65535."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"{name} must be an int from 0 (any free port) to 65535, got {value!r}")
    return value
