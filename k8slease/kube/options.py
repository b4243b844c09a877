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


def seconds(
    name: str,
    value: object,
    *,
    minimum: float = 0.0,
    above: bool = False,
    maximum: float | None = None,
    prefix: str = "",
) -> float:
    """``value`` as float seconds: a finite number (not a bool) ``>= minimum`` (``> minimum``
    when ``above``) and ``<= maximum`` when given."""
    low = f"> {minimum:g}" if above else f">= {minimum:g}"
    wanted = f"a finite number of seconds {low}" + (
        f" and <= {maximum:g}" if maximum is not None else ""
    )
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{prefix}{name} must be {wanted}, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{prefix}{name} must be {wanted}, got {value!r}")
    too_low = number <= minimum if above else number < minimum
    if too_low or (maximum is not None and number > maximum):
        raise ConfigError(f"{prefix}{name} must be {wanted}, got {value!r}")
    return number


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
