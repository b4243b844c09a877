"""Where the cluster's cached artefacts live, and the lock that keeps two builds apart."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def cluster_cache_root() -> Path:
    """``$XDG_CACHE_HOME/k8slease/cluster`` (``~/.cache/...`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "k8slease" / "cluster"


@contextmanager
def file_lock(key: str, on_wait: Callable[[], None]) -> Iterator[None]:
    """Hold ``<cache>/<key>.lock``; ``on_wait`` is called once if another process holds it."""
    root = cluster_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{key}.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
