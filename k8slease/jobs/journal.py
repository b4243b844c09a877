"""A replica's journal of kept run records: the file that outlives its process (issue 26).

A run that finished while its release could not be written is kept in memory and written by
the lock's next write (:mod:`k8slease.jobs.settle`). A replica that dies first (its container
killed while cut off from the API server, say) would take the record with it, and the tick
would stay recorded ``lost`` though it ran. So every lock of a ``Jobs`` (or ``TickLock``)
writes its kept record through to one file as soon as it is kept, and clears it once written:

* by default (``journal="auto"``) the file is ``/dev/termination-log`` when it exists and is
  writable, which it is in every container Kubernetes starts (the ``terminationMessagePath``
  default): the kubelet copies it into the Pod's status when the container ends, however it
  ends (a crash, OOM, SIGKILL included), and the operator merges it into the job Leases
  (:mod:`k8slease.operator.podjournals`). Elsewhere (a laptop, a test) nothing is written;
* a path writes there (a process of several ``Jobs``, each its own file); ``None`` writes
  nothing.

The file holds the records kept now, in the format of :mod:`k8slease.lease.keptruns`, and is
emptied when none are kept. A failing write is said once at WARNING and never reaches the lock:
the journal is a second copy, the memory the first.
"""

from __future__ import annotations

import os
import threading

from k8slease.errors import ConfigError
from k8slease.lease.jobrecord import RunRecord
from k8slease.lease.keptruns import MESSAGE_LIMIT, KeptRun, encode_journal
from k8slease.logs import get_logger

log = get_logger("k8slease.jobs.journal")

#: Where a container's termination message is written unless its Pod says otherwise.
TERMINATION_LOG = "/dev/termination-log"
AUTO = "auto"


def journal_path(option: str | os.PathLike[str] | None) -> str | None:
    """The file a ``journal`` option names: ``"auto"`` is :data:`TERMINATION_LOG` when that
    exists and is writable, else none; ``None`` is none; a path is itself."""
    if option is None:
        return None
    if isinstance(option, str) and option == AUTO:
        ok = os.path.isfile(TERMINATION_LOG) and os.access(TERMINATION_LOG, os.W_OK)
        return TERMINATION_LOG if ok else None
    if not isinstance(option, str | os.PathLike) or not os.fspath(option):
        raise ConfigError(f'journal must be "auto", a file path or None, got {option!r}')
    return os.fspath(option)


class RunJournal:
    """The kept run records of one process's locks, written through to ``path`` (``None``:
    kept in memory only, which is what the locks need; the file is the copy for the operator).

    :meth:`at` gives every ``Jobs`` and ``TickLock`` of a process that names the same file the
    same journal, so that none overwrites another's records."""

    _by_path: dict[str, RunJournal] = {}
    _by_path_mutex = threading.Lock()

    def __init__(self, path: str | None, *, limit: int = MESSAGE_LIMIT) -> None:
        self.path = path
        self.limit = limit
        self._kept: dict[tuple[str, str], RunRecord] = {}
        self._mutex = threading.Lock()
        self._failed = False
        self._cut = 0

    @classmethod
    def at(cls, path: str | None) -> RunJournal:
        """The process's journal writing to ``path``; a journal of its own for ``None``."""
        if path is None:
            return cls(None)
        with cls._by_path_mutex:
            journal = cls._by_path.get(path)
            if journal is None:
                journal = cls._by_path[path] = cls(path)
            return journal

    def keep(self, lease: str, identity: str, run: RunRecord | None) -> None:
        """Record that ``identity``'s lock of ``lease`` keeps ``run`` now (``None``: nothing
        any more)."""
        key = (lease, identity)
        with self._mutex:
            if self._kept.get(key) is run:
                return
            if run is None:
                del self._kept[key]
            else:
                self._kept[key] = run
            if self.path is not None:
                self._write(self.path)

    def kept(self) -> tuple[KeptRun, ...]:
        """The records kept now."""
        with self._mutex:
            return tuple(KeptRun(lease, run) for (lease, _), run in sorted(self._kept.items()))

    def _write(self, path: str) -> None:
        text, cut = encode_journal(
            (KeptRun(lease, run) for (lease, _), run in self._kept.items()), limit=self.limit
        )
        if cut and cut != self._cut:
            log.warning("journal.records_cut", path=path, kept=len(self._kept), cut=cut)
        self._cut = cut
        try:
            # in place, not renamed over: the termination log is a file the kubelet mounted
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as exc:
            if not self._failed:
                log.warning("journal.write_failed", path=path, error=str(exc))
            self._failed = True
            return
        self._failed = False
