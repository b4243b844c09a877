"""Wedge a running app replica from outside, the way a deadlock would: every thread of its
process stops, except the one serving its health endpoint. Run as root on the node (ptrace).

    python freeze.py PID

Each thread but the health server's is stopped with ``PTRACE_SEIZE`` + ``PTRACE_INTERRUPT``
(ptrace stops one thread, not the whole process, unlike SIGSTOP); the health server's thread
(the one blocked in ``poll()`` on one descriptor with a 500 ms timeout: ``serve_forever``)
keeps answering, so ``/healthz`` says what ``Jobs.healthy()`` decides about the wedged elector.
A stopped thread may hold the GIL or a lock the health check needs (it was stopped at a random
instant): then ``/healthz`` cannot answer at all. That is checked from inside the pod's network
namespace; if so, every thread is let go and the freeze is tried again, so what the kubelet
probes is the app's own verdict, not a hung socket.

Lines on stdout (JSON): ``{"frozen": [...], "kept": TID, "attempts": N}`` once frozen, then
``{"healthz": STATUS, "after": SECONDS}`` for the first answer other than 200. A line (or EOF)
on stdin lets every thread go (``PTRACE_DETACH``): ``{"thawed": N}``. The tracer must stay
alive while the threads are stopped (its exit would let them go), hence this process.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.polling import poll  # run with the repository root on PYTHONPATH

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000  # __WALL: wait for any thread, not only the thread group leader
CLONE_NEWNET = 0x40000000
#: /proc/<tid>/syscall of serve_forever's thread: poll(fds, 1, 500).
SERVER_POLL = ("7", "0x1", "0x1f4")
HEALTH_URL = "http://127.0.0.1:8080/healthz"

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def ptrace(request: int, tid: int, data: int = 0) -> None:
    if libc.ptrace(request, tid, None, ctypes.c_void_p(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"ptrace({request:#x}, {tid}): {os.strerror(error)}")


def threads(pid: int) -> list[int]:
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))


def health_server_thread(pid: int, timeout: float = 10.0) -> int:
    """The thread blocked in serve_forever's poll (sampled until one is seen there)."""

    def blocked() -> int | None:
        for tid in threads(pid):
            try:
                fields = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
            except OSError:
                continue
            if len(fields) > 3 and (fields[0], fields[2], fields[3]) == SERVER_POLL:
                return tid
        return None

    try:  # it is out of poll() only while it serves a request
        return poll("health server thread blocked in poll()", blocked, timeout)
    except AssertionError:
        raise SystemExit(f"no thread of {pid} is blocked in the health server's poll()") from None


def freeze(pid: int, keep: int) -> list[int]:
    """Stop every thread of ``pid`` but ``keep``; repeats until no new thread appeared."""
    frozen: list[int] = []
    while True:
        new = [t for t in threads(pid) if t != keep and t not in frozen]
        if not new:
            return frozen
        for tid in new:
            try:
                ptrace(PTRACE_SEIZE, tid)
                ptrace(PTRACE_INTERRUPT, tid)
                os.waitpid(tid, WALL)
            except (OSError, ChildProcessError):
                if Path(f"/proc/{pid}/task/{tid}").exists():
                    raise
                continue  # it ended meanwhile (a request thread of the health server)
            frozen.append(tid)


def thaw(frozen: list[int]) -> int:
    released = 0
    for tid in frozen:
        try:
            ptrace(PTRACE_DETACH, tid)
            released += 1
        except OSError:
            pass  # the thread is gone (the kubelet killed the container)
    return released


def enter_network_namespace(pid: int) -> None:
    with open(f"/proc/{pid}/ns/net", "rb") as namespace:
        if libc.setns(namespace.fileno(), CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns into the network of {pid}: {os.strerror(error)}")


def healthz(timeout: float) -> int | None:
    """The status /healthz answers, or None when it does not answer within ``timeout``."""
    try:
        with urllib.request.urlopen(HEALTH_URL, timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (OSError, TimeoutError):
        return None


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def main() -> int:
    pid = int(sys.argv[1])
    enter_network_namespace(pid)
    attempts = 0
    while True:
        attempts += 1
        keep = health_server_thread(pid)
        frozen = freeze(pid, keep)
        began = time.monotonic()
        if healthz(timeout=3.0) is not None:
            break
        thaw(frozen)  # a stopped thread holds what the health check needs: try another instant
        if attempts == 5:
            raise SystemExit("/healthz never answered with the other threads stopped (5 tries)")
        time.sleep(1.0)  # let the threads move on: the next freeze lands at another instant
    say(frozen=frozen, kept=keep, attempts=attempts)

    def verdict() -> tuple[int | None] | None:
        status = healthz(timeout=3.0)
        return None if status == 200 else (status,)

    try:  # the first verdict other than 200, or 200 still after 30 s (a failure)
        (status,) = poll("an answer other than 200", verdict, 30.0, every=0.2)
    except AssertionError:
        status = 200
    say(healthz=status, after=round(time.monotonic() - began, 3))
    sys.stdin.readline()
    say(thawed=thaw(frozen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
