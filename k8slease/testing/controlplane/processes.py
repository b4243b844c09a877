"""Child processes of the control plane: started with a log file, stopped politely, then not."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .gotool import tail

STOP_GRACE = 15.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """(In the child, Linux) get SIGTERM when the parent dies, so a killed test run leaks no
    etcd or kube-apiserver."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Child:
    """One long-running binary whose stdout and stderr go to ``log``."""

    def __init__(self, name: str, argv: Sequence[str], log: Path) -> None:
        self.name, self.argv, self.log = name, list(argv), log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )

    def exited(self) -> int | None:
        """The exit status if the process has ended, else None."""
        return None if self.process is None else self.process.poll()

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns once it has exited."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def describe_exit(self) -> str:
        """'<name> exited with status N' and the tail of its log."""
        return f"{self.name} exited with status {self.exited()}; last lines of {self.log}:\n" + (
            tail(self.log)
        )
