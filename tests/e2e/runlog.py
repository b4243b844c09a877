"""Every line the app's pods log, kept after the pods are gone: a cross-check of the Leases.

A pod's log can be read only while the pod exists, so :class:`PodLogs` starts a follower for
each pod as soon as the pod is listed (any phase), retries until the container's log is
readable, resumes a stream that broke while the pod still exists, and keeps every line it read
(with the runtime's timestamp, so a resumed stream adds no line twice).

A follower started on a pod that is being deleted may still miss lines: the logs are used to
find what must never happen (a tick whose run two pods logged) and the warnings a lost tick
must produce, never to decide that a tick did not run. That is the Leases' job
(:mod:`leasehistory`).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

RUN_EVENT = "invoices.written"


class PodLogs:
    """Follows the logs of every pod matching ``selector`` in ``namespace``."""

    def __init__(self, kubectl: Path | str, kubeconfig: Path, namespace: str, selector: str):
        self._kubectl, self._namespace, self._selector = str(kubectl), namespace, selector
        self._env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        self._followers: dict[str, threading.Thread] = {}
        self._lines: dict[str, dict[str, None]] = {}  # pod -> timestamped lines, in order
        self._processes: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._discover, name="podlogs", daemon=True)

    def __enter__(self) -> PodLogs:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            process.terminate()
        for follower in list(self._followers.values()):
            follower.join(30)

    def _get(self, *what: str, jsonpath: str) -> subprocess.CompletedProcess[str]:
        """``kubectl get WHAT -n NAMESPACE -o jsonpath=JSONPATH`` (30 s at most); a failure is
        in the answer's return code, never raised."""
        return subprocess.run(
            [self._kubectl, "get", *what, "-n", self._namespace, "-o", f"jsonpath={jsonpath}"],
            capture_output=True,
            text=True,
            env=self._env,
            check=False,
            timeout=30,
        )

    def _listed(self) -> list[str]:
        listed = self._get(
            "pods", "-l", self._selector, jsonpath="{range .items[*]}{.metadata.name}{'\\n'}{end}"
        )
        return listed.stdout.split() if listed.returncode == 0 else []

    def _discover(self) -> None:
        while not self._stop.is_set():
            for pod in self._listed():
                if pod not in self._followers:
                    self._lines.setdefault(pod, {})
                    follower = threading.Thread(
                        target=self._follow, args=(pod,), name=f"podlogs-{pod}", daemon=True
                    )
                    self._followers[pod] = follower
                    follower.start()
            self._stop.wait(0.3)

    def _gone(self, pod: str) -> bool:
        """Whether the pod no longer exists or its container has ended (nothing more to read)."""
        result = self._get(
            "pod", pod, jsonpath="{.status.containerStatuses[0].state.terminated.reason}"
        )
        return result.returncode != 0 or bool(result.stdout.strip())

    def _follow(self, pod: str) -> None:
        while not self._stop.is_set():
            process = subprocess.Popen(
                [self._kubectl, "logs", "-f", "--timestamps", "-n", self._namespace, pod],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=self._env,
            )
            with self._lock:
                self._processes.add(process)
            assert process.stdout is not None
            for line in process.stdout:
                with self._lock:
                    self._lines[pod].setdefault(line.rstrip("\n"), None)
            process.wait()
            with self._lock:
                self._processes.discard(process)
            if self._gone(pod):
                return
            self._stop.wait(0.5)  # not started yet, or the stream broke: read again

    # -- reading ------------------------------------------------------------------------------

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """Every JSON record logged (``event`` only, when given), with ``pod`` and ``at``
        (the runtime's timestamp of the line)."""
        with self._lock:
            lines = [(pod, line) for pod, seen in self._lines.items() for line in seen]
        found = []
        for pod, line in lines:
            at, _, text = line.partition(" ")
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and (event is None or record.get("event") == event):
                found.append({**record, "pod": pod, "at": at})
        return found

    def periods(self) -> Counter[str]:
        """How many times each tick (``period``) was logged as run."""
        return Counter(str(run["period"]) for run in self.events(RUN_EVENT))

    def pods(self) -> list[str]:
        """The pods of which at least one line was read."""
        with self._lock:
            return sorted(pod for pod, seen in self._lines.items() if seen)
