"""What a job function receives: :class:`JobContext`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class JobContext:
    """The context passed to every job function as its only argument.

    ``tick`` is the scheduled fire time being run (``None`` for singletons). ``fencing_token`` is
    the grant's token for coordinated jobs (pass it to the systems you write to so they can reject
    a stale holder) and ``None`` for EVERY_REPLICA jobs. ``lost`` is set when this replica may no
    longer be the only one running the job (the lock or leadership could not be kept): stop soon.
    Coroutine jobs are also cancelled then. ``log`` is a structlog logger bound to the job.
    """

    job: str
    group: str
    identity: str
    tick: datetime | None
    fencing_token: int | None
    lost: threading.Event
    log: Any
