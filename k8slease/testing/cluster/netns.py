"""The cluster's private network + mount namespace, and getting everything out of it again.

A holder process (``unshare --net --mount --propagation private sleep``) owns both namespaces;
every daemon is started with ``nsenter --target <holder>`` in front of its command line, so it
sees the namespace's links and the overlays on ``/var`` and ``/run``, never the machine's.
Containers get their own namespaces under it and their cgroups under one cluster-owned cgroup
root. :func:`reap` kills every process in the namespace or under that root; the namespaces
(links, routes, iptables rules, mounts) vanish with their last process; the cgroups are then
removed by :func:`remove_cgroups`.

:class:`Forwarder` makes the API server reachable from the machine: it listens on
127.0.0.1 of the machine and connects, from a thread that has joined the network namespace,
to the API server inside.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from k8slease.testing.tools import run_tool

CGROUP_FS = Path("/sys/fs/cgroup")
_CLONE_NEWNET = 0x40000000


class NamespaceError(RuntimeError):
    """A namespace could not be made or set up (the message says which step and why)."""


def _pdeathsig() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


class Namespace:
    """The holder of one private network + mount namespace."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "private", "sleep", "infinity"],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_pdeathsig,
        )
        deadline = time.monotonic() + 10
        while self._inode("net") == _own_inode("net"):  # unshare has not exec'd sleep yet
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise NamespaceError(f"unshare --net --mount failed (status {self.process.poll()})")
            time.sleep(0.01)
        self.net_inode = self._inode("net")
        self.mnt_inode = self._inode("mnt")

    @property
    def pid(self) -> int:
        return self.process.pid

    def _inode(self, kind: str) -> int:
        try:
            return os.stat(f"/proc/{self.pid}/ns/{kind}").st_ino
        except OSError:
            return _own_inode(kind)

    def enter(self) -> list[str]:
        """The command prefix that runs a command inside both namespaces."""
        return ["nsenter", f"--target={self.pid}", "--net", "--mount", "--"]

    def run(self, argv: Sequence[str], *, what: str, timeout: float = 60.0) -> str:
        """Run ``argv`` inside; its stdout, or ``NamespaceError`` naming ``what`` failed."""
        return run_tool(
            [*self.enter(), *argv],
            timeout=timeout,
            failure=NamespaceError,
            what=f"{what} ({' '.join(argv)})",
        ).stdout

    def members(self) -> list[int]:
        """PIDs of every process in this network or mount namespace (not the holder)."""
        found = []
        for pid in _pids():
            if pid == self.pid:
                continue
            for kind, inode in (("net", self.net_inode), ("mnt", self.mnt_inode)):
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{pid}/ns/{kind}").st_ino == inode:
                        found.append(pid)
                        break
        return found

    def close(self) -> None:
        """Kill the holder (after :func:`reap`, the namespaces go with it)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _own_inode(kind: str) -> int:
    return os.stat(f"/proc/self/ns/{kind}").st_ino


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def cgroup_dirs(root: str) -> list[Path]:
    """Every directory of cgroup ``root`` (``/k8slease-...``) in every mounted hierarchy
    (v1 controllers and the v2 tree), deepest first."""
    relative = root.strip("/")
    tops = [CGROUP_FS / relative] + [
        entry / relative for entry in CGROUP_FS.iterdir() if entry.is_dir()
    ]
    found: list[Path] = []
    for top in tops:
        if top.is_dir():
            found += [Path(path) for path, _, _ in os.walk(top)]
    return sorted(set(found), key=lambda path: len(path.parts), reverse=True)


def make_cgroup_root(root: str) -> None:
    """Create cgroup ``root`` in every mounted hierarchy (the kubelet refuses a cgroup root
    that does not exist); a v1 cpuset gets its parent's CPUs and memory nodes."""
    relative = root.strip("/")
    for hierarchy in CGROUP_FS.iterdir():
        if not hierarchy.is_dir() or hierarchy.is_symlink():
            continue
        directory = hierarchy / relative
        directory.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists() and not (directory / name).read_text().strip():
                (directory / name).write_text((hierarchy / name).read_text())


def cgroup_pids(root: str) -> set[int]:
    """PIDs of every process in cgroup ``root`` or below it, in any hierarchy."""
    pids: set[int] = set()
    for directory in cgroup_dirs(root):
        with contextlib.suppress(OSError):
            text = (directory / "cgroup.procs").read_text()
            pids.update(int(line) for line in text.split())
    return pids


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def reap(namespace: Namespace, cgroup_root: str, *, timeout: float = 30.0) -> None:
    """SIGKILL every process of the namespace and of the cgroup root until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        left = set(namespace.members()) | cgroup_pids(cgroup_root)
        if not left:
            return
        if time.monotonic() > deadline:
            raise NamespaceError(f"processes survived SIGKILL for {timeout:.0f} s: {sorted(left)}")
        kill_all(left)
        for pid in left:  # reap our own children so they do not linger as zombies
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)


def remove_cgroups(root: str, *, timeout: float = 10.0) -> None:
    """Remove cgroup ``root`` and everything below it (its processes must be gone)."""
    deadline = time.monotonic() + timeout
    while True:
        failed = []
        for directory in cgroup_dirs(root):
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError as error:
                failed.append(f"{directory}: {error.strerror}")
        if not failed:
            return
        if time.monotonic() > deadline:
            raise NamespaceError("cgroups could not be removed: " + "; ".join(failed[:5]))
        time.sleep(0.1)  # a killed process leaves its cgroup a moment after it dies


def _setns(pid: int) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns(CLONE_NEWNET) failed")
    finally:
        os.close(fd)


class Forwarder:
    """127.0.0.1:<port> of the machine -> ``target`` inside the namespace, one TCP stream each."""

    def __init__(self, namespace_pid: int, target: tuple[str, int]) -> None:
        self.target = target
        self._pid = namespace_pid
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="cluster-forwarder", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise NamespaceError(f"the API forwarder could not join the namespace: {self._error}")

    def _serve(self) -> None:
        try:
            _setns(self._pid)  # this thread only: its new sockets are inside the namespace
        except OSError as error:
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(5)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            source.close()
