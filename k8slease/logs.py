"""The package's loggers: structlog over the stdlib logger ``k8slease`` and its children.

k8slease never configures logging: it neither calls ``structlog.configure`` nor
``logging.basicConfig``. Every logger is ``structlog.stdlib.BoundLogger`` wrapping
``logging.getLogger("k8slease.<part>")`` with processors of its own, so an application controls
level and output the usual way (``logging.getLogger("k8slease").setLevel(logging.DEBUG)``, its own
handlers), and with nothing configured only warnings and errors appear (on stderr, through
Python's last-resort handler).

A record's message is the event followed by its fields as ``key=value``; the event name and the
fields themselves are also on the record, as ``record.k8slease_event`` and
``record.k8slease_fields``, for handlers that render structured output.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any, cast

import structlog
from structlog.stdlib import BoundLogger

__all__ = ["ROOT", "Logger", "get_logger", "render_fields"]

#: The stdlib logger every k8slease logger is a child of.
ROOT = "k8slease"

Logger = BoundLogger


def _value(value: object) -> str:
    if isinstance(value, str):
        if value and not any(c.isspace() or c in "\"'=" for c in value):
            return value
        return repr(value)
    return repr(value) if not isinstance(value, bool | int | float) else str(value)


def render_fields(fields: MutableMapping[str, Any]) -> str:
    """``key=value`` pairs, in the order the fields were bound."""
    return " ".join(f"{key}={_value(value)}" for key, value in fields.items())


def _to_stdlib(
    logger: object, method_name: str, event_dict: MutableMapping[str, Any]
) -> tuple[tuple[object, ...], dict[str, Any]]:
    """The last processor: the positional and keyword arguments of the stdlib logging call."""
    exc_info = event_dict.pop("exc_info", None)
    stack_info = bool(event_dict.pop("stack_info", False))
    event = str(event_dict.pop("event", ""))
    fields = dict(event_dict)
    message = f"{event} {render_fields(fields)}" if fields else event
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
