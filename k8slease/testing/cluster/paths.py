"""Where the cluster's cached artefacts live, and the lock that keeps two builds apart."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from k8slease.testing.controlplane.cache import file_lock_in


def cluster_cache_root() -> Path:
    """``$XDG_CACHE_HOME/k8slease/cluster`` (``~/.cache/...`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "k8slease" / "cluster"


def file_lock(key: str, on_wait: Callable[[], None]) -> AbstractContextManager[None]:
    """Hold ``<cache>/<key>.lock``; ``on_wait`` is called once if another process holds it."""
    return file_lock_in(cluster_cache_root(), key, on_wait)
