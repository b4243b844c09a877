"""Readable console logs for the ``k8slease`` command (the library itself configures nothing)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO


def configure_console_logging(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Time, level, logger and ``event key=value`` lines on stderr; k8slease at ``level``, the
    rest of the process (the kubernetes client, urllib3, aiohttp) from WARNING."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
    )
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    logging.getLogger("k8slease").setLevel(level)
