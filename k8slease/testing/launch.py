"""What the test servers share: started and stopped as context managers, served from the command
line until SIGINT/SIGTERM, and (for the tiers made of separate processes) a state directory, a
PKI, an admin kubeconfig, child processes watched while the tier comes up, and the command line's
``--kubeconfig`` and ``--build-only``.

The embedded :class:`~k8slease.testing.APIServer`, the :class:`~.slowproxy.DelayProxy`, the real
:class:`~.controlplane.ControlPlane` and the single-node :class:`~.cluster.Cluster` each used to
carry their own copy of this; here it is written once, and each tier keeps only what differs.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, ClassVar, Self

from .kubeconfig import kubeconfig_target_problem

if TYPE_CHECKING:
    from .controlplane.build import Progress
    from .controlplane.certs import PKI
    from .controlplane.processes import Child


class StartStop:
    """A context manager that calls :meth:`start` on entry (returning what it returns) and
    :meth:`stop` on exit, whatever ended the block."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Launched(StartStop):
    """A tier made of child processes: its temporary state directory, its PKI, the admin
    kubeconfig (at ``kubeconfig`` if given, else in the directory), its children (stopped in
    reverse order) and the wait for it to come up.

    Subclasses set :attr:`name` (``"the cluster"``) and :attr:`error` (raised when a child exits
    while the tier comes up, or it is not up in ``start_timeout`` seconds).
    """

    name: ClassVar[str] = "the tier"
    error: ClassVar[type[RuntimeError]] = RuntimeError

    def __init__(
        self, *, kubeconfig: str | Path | None, start_timeout: float, progress: Progress
    ) -> None:
        self.start_timeout = start_timeout
        self._progress = progress
        self._kubeconfig_path = Path(kubeconfig) if kubeconfig is not None else None
        self._kubeconfig: Path | None = None
        self._directory: Path | None = None
        self._pki: PKI | None = None
        self._children: list[Child] = []
        #: Seconds the last :meth:`start` took until the tier answered (``None`` before).
        self.start_seconds: float | None = None

    @property
    def directory(self) -> Path:
        """The tier's state directory (logs, PKI, data), while it runs."""
        if self._directory is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._directory

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (``system:masters``), written once the tier answers."""
        if self._kubeconfig is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._kubeconfig

    def _require_pki(self) -> PKI:
        if self._pki is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._pki

    def _admin_kubeconfig_target(self) -> Path:
        """Where the admin kubeconfig goes: the path given, else the state directory."""
        return self._kubeconfig_path or self.directory / "admin.kubeconfig"

    def _wait_until(
        self,
        ready: Callable[[], bool],
        *,
        deadline: float,
        poll: float,
        timed_out: Callable[[], str],
        tolerate: tuple[type[Exception], ...] = (),
    ) -> None:
        """Return once ``ready()`` (``tolerate``: exceptions that mean "not yet"); raise
        :attr:`error` when a child exits first, or with ``timed_out()`` after ``deadline``
        (monotonic)."""
        while True:
            for child in self._children:
                if child.exited() is not None:
                    raise self.error(f"{self.name} failed to start: {child.describe_exit()}")
            try:
                if ready():
                    return
            except tolerate:
                pass
            if time.monotonic() > deadline:
                raise self.error(timed_out())
            time.sleep(poll)  # separate processes: nothing to wait on but their answers

    def _stop_children(self, grace: float | None = None) -> None:
        """Stop every child, the last started first (SIGTERM, then SIGKILL after ``grace``)."""
        for child in reversed(self._children):
            if grace is None:
                child.stop()
            else:
                child.stop(grace=grace)
        self._children = []

    def _remove_files(self) -> None:
        """Remove the admin kubeconfig written outside the directory, then the directory."""
        written, self._kubeconfig = self._kubeconfig, None
        if written is not None and self._kubeconfig_path is not None:
            written.unlink(missing_ok=True)
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
            self._pki = None


def serve_until_signalled(
    prog: str,
    server: StartStop,
    *,
    failures: Sequence[tuple[tuple[type[BaseException], ...], int, str]],
    ready: Callable[[], str],
) -> int:
    """``python -m k8slease <prog>``'s run: start ``server``, print ``ready()`` (one line,
    flushed), serve until SIGINT/SIGTERM, stop it; returns the exit code (0 after a signal).

    ``failures`` maps what ``start`` may raise, in order, to the exit code and the message's
    prefix (``k8slease <prog>: <prefix><error>`` is printed); anything else propagates.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except BaseException as exc:
            for kinds, code, prefix in failures:
                if isinstance(exc, kinds):
                    print(f"k8slease {prog}: {prefix}{exc}", flush=True)
                    return code
            raise
        try:
            print(ready(), flush=True)
            stop.wait()
        finally:
            server.stop()
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def tier_parser(
    prog: str,
    description: str,
    *,
    build_help: str,
    build_parts: Sequence[str] = (),
    port: Callable[[str], int] | None = None,
) -> argparse.ArgumentParser:
    """The options of ``python -m k8slease <prog>`` for a tier made of processes: ``--port``
    (kube-apiserver's; ``port`` parses it) where the tier's port can be chosen, ``--kubeconfig``
    and ``--build-only`` (``build_help``). With ``build_parts``, ``--build-only`` takes one of
    them (the first when it is given alone; ``None`` without the option); else it is a flag.
    """
    parser = argparse.ArgumentParser(prog=f"k8slease {prog}", description=description)
    if port is not None:
        parser.add_argument(
            "--port", type=port, default=0, help="kube-apiserver's HTTPS port (default: a free one)"
        )
    parser.add_argument(
        "--kubeconfig", default=None, help="where to write the admin kubeconfig (default: temp)"
    )
    if build_parts:
        parser.add_argument(
            "--build-only",
            nargs="?",
            const=build_parts[0],
            default=None,
            choices=build_parts,
            help=build_help,
        )
    else:
        parser.add_argument("--build-only", action="store_true", help=build_help)
    return parser


def kubeconfig_refused(prog: str, path: str | None) -> bool:
    """Whether ``--kubeconfig path`` cannot be written (a directory, under a file, not
    writable): then ``k8slease <prog>: <why>`` is printed on stderr, one line, and the command
    exits with status 2 before it starts (or builds) anything. A missing parent is no error:
    it is created."""
    problem = None if path is None else kubeconfig_target_problem(path)
    if problem is not None:
        print(f"k8slease {prog}: {problem}", file=sys.stderr, flush=True)
    return problem is not None


def print_built(
    prog: str, build: Callable[[], Iterable[object]], *, failure: type[Exception]
) -> int:
    """``python -m k8slease <prog> --build-only``'s run: print each path ``build()`` returns (a
    line each, flushed) and return 0; when it raises ``failure``, print
    ``k8slease <prog>: <error>`` and return 1."""
    try:
        for path in build():
            print(path, flush=True)
    except failure as exc:
        print(f"k8slease {prog}: {exc}", flush=True)
        return 1
    return 0
