"""The package's loggers: structlog over the stdlib logger ``k8slease`` and its children.

k8slease never configures logging: it neither calls ``structlog.configure`` nor
``logging.basicConfig``. Every logger is ``structlog.stdlib.BoundLogger`` wrapping
``logging.getLogger("k8slease.<part>")`` with processors of its own, so an application controls
level and output the usual way (``logging.getLogger("k8slease").setLevel(logging.DEBUG)``, its own
handlers), and with nothing configured only warnings and errors appear (on stderr, through
Python's last-resort handler).

A record's message is the event followed by its fields as ``key=value``, on one line: strings
(holder identities and job names come from Leases other processes write) are escaped, so no
control character, ANSI sequence or newline reaches a log line, and cut to a bounded length
(:mod:`k8slease.shown`). The event name and the fields themselves are also on the record, as
``record.k8slease_event`` and ``record.k8slease_fields`` (strings escaped and bounded too), for
handlers that render structured output.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any, cast

import structlog
from structlog.stdlib import BoundLogger

from .shown import LIMIT, shown

__all__ = ["ROOT", "Logger", "get_logger", "render_fields"]

#: The stdlib logger every k8slease logger is a child of.
ROOT = "k8slease"

Logger = BoundLogger


#: Bound on the event text of one log line (fields are bound each to ``shown.LIMIT``).
EVENT_LIMIT = 2048


def _value(value: object) -> str:
    """One field's value on the line: plain when it is a simple token, else quoted with every
    control character escaped; cut to ``shown.LIMIT`` (a Lease's strings are foreign input)."""
    if isinstance(value, bool | int | float):
        return str(value)
    if not isinstance(value, str):
        return shown(repr(value))
    head = value[:LIMIT]
    suffix = f"...(+{len(value) - LIMIT} chars)" if len(value) > LIMIT else ""
    if head and head.isprintable() and not any(c.isspace() or c in "\"'=\\" for c in head):
        return head + suffix
    return repr(head) + suffix  # repr escapes every non-printable character


def render_fields(fields: MutableMapping[str, Any]) -> str:
    """``key=value`` pairs, in the order the fields were bound."""
    return " ".join(f"{key}={_value(value)}" for key, value in fields.items())


def _to_stdlib(
    logger: object, method_name: str, event_dict: MutableMapping[str, Any]
) -> tuple[tuple[object, ...], dict[str, Any]]:
    """The last processor: the positional and keyword arguments of the stdlib logging call."""
    exc_info = event_dict.pop("exc_info", None)
    stack_info = bool(event_dict.pop("stack_info", False))
    event = shown(event_dict.pop("event", ""), limit=EVENT_LIMIT)
    raw = dict(event_dict)
    message = f"{event} {render_fields(raw)}" if raw else event
    # the structured copy, for handlers that render it: strings escaped and bounded as well
    fields = {key: shown(value) if isinstance(value, str) else value for key, value in raw.items()}
    kwargs: dict[str, Any] = {
        "extra": {"k8slease_event": event, "k8slease_fields": fields},
        "stack_info": stack_info,
        "stacklevel": 1,
    }
    if exc_info:
        kwargs["exc_info"] = exc_info
    return (message,), kwargs


def get_logger(name: str) -> Logger:
    """The structlog logger over the stdlib logger ``name`` (a ``k8slease.`` child)."""
    if name != ROOT and not name.startswith(ROOT + "."):
        raise ValueError(f"k8slease loggers live under {ROOT!r}, got {name!r}")
    return cast(
        Logger,
        structlog.wrap_logger(
            logging.getLogger(name),
            processors=[structlog.stdlib.filter_by_level, _to_stdlib],
            wrapper_class=BoundLogger,
            context_class=dict,
            cache_logger_on_first_use=False,
        ),
    )
