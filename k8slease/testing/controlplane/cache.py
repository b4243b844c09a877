"""Where the built binaries live: the user cache directory, one directory per version pair.

``$XDG_CACHE_HOME/k8slease/controlplane/<kubernetes>-<etcd>/`` (``~/.cache`` without the
variable) holds ``kube-apiserver`` and ``etcd``. A directory is complete or absent: builds go
to a temporary sibling renamed into place, under a lock file so that two processes (say, two
pytest runs) never build at once; the second waits and then finds the first one's result.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from .versions import cache_key

KUBE_APISERVER = "kube-apiserver"
ETCD = "etcd"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/k8slease/controlplane`` (``~/.cache/...`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "k8slease" / "controlplane"


@dataclass(frozen=True)
class Binaries:
    """The two executables of one cached build."""

    directory: Path

    @property
    def kube_apiserver(self) -> Path:
        return self.directory / KUBE_APISERVER

    @property
    def etcd(self) -> Path:
        return self.directory / ETCD

    def complete(self) -> bool:
        """Whether both executables are present."""
        return all(os.access(p, os.X_OK) for p in (self.kube_apiserver, self.etcd))


def cached(key: str | None = None) -> Binaries | None:
    """The cached binaries for ``key`` (the pinned versions by default), or None."""
    binaries = Binaries(cache_root() / (key or cache_key()))
    return binaries if binaries.complete() else None


def build_lock(key: str, on_wait: Callable[[], None]) -> AbstractContextManager[None]:
    """Hold the build lock of ``key``; ``on_wait`` is called once if another process holds it."""
    return file_lock_in(cache_root(), key, on_wait)


@contextmanager
def file_lock_in(root: Path, key: str, on_wait: Callable[[], None]) -> Iterator[None]:
    """Hold ``<root>/<key>.lock`` (an exclusive ``flock``, which keeps two builds apart across
    processes); ``on_wait`` is called once if another process holds it."""
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
