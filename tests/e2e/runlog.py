"""Every run of the app's ONCE_PER_TICK job, from every pod's log, across pod replacements.

The demo app logs ``invoices.written`` (JSON line, with the tick's ``period`` and the grant's
``fencing_token``) once per run. A pod's log is gone once the pod is deleted, so
:class:`RunLog` follows each pod from its start: a thread lists the app's pods every second and
starts ``kubectl logs -f`` for every pod it has not followed yet.
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


class RunLog:
    """Follows the logs of every pod matching ``selector`` in ``namespace``."""

    def __init__(self, kubectl: Path | str, kubeconfig: Path, namespace: str, selector: str):
        self._kubectl, self._namespace, self._selector = str(kubectl), namespace, selector
        self._env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        self._followed: dict[str, subprocess.Popen[str]] = {}
        self._runs: list[dict[str, Any]] = []
        self._read_any: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._discover, name="runlog", daemon=True)

    def __enter__(self) -> RunLog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for process in self._followed.values():
            process.terminate()
            process.wait()

    def _discover(self) -> None:
        while not self._stop.is_set():
            listed = subprocess.run(
                [
                    self._kubectl,
                    "get",
                    "pods",
                    "-n",
                    self._namespace,
                    "-l",
                    self._selector,
                    "-o",
                    'jsonpath={range .items[?(@.status.phase=="Running")]}'
                    "{.metadata.name}{'\\n'}{end}",
                ],
                capture_output=True,
                text=True,
                env=self._env,
                check=False,
                timeout=30,
            )
            for pod in listed.stdout.split():
                follower = self._followed.get(pod)
                # Follow new pods; follow again when `kubectl logs` failed before any line
                # (the container was not up yet), never twice at once.
                if follower is None or (
                    follower.poll() not in (None, 0) and pod not in self._read_any
                ):
                    self._follow(pod)
            self._stop.wait(0.5)

    def _follow(self, pod: str) -> None:
        process = subprocess.Popen(
            [self._kubectl, "logs", "-f", "-n", self._namespace, pod],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self._env,
        )
        self._followed[pod] = process
        threading.Thread(target=self._read, args=(pod, process), daemon=True).start()

    def _read(self, pod: str, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._read_any.add(pod)
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("event") == RUN_EVENT:
                with self._lock:
                    self._runs.append({**record, "pod": pod})

    def runs(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._runs)

    def periods(self) -> Counter[str]:
        """How many times each tick (``period``) ran."""
        return Counter(str(run["period"]) for run in self.runs())

    def pods(self) -> list[str]:
        """The pods whose log is being read (at least one line read: the history is coming)."""
        return sorted(pod for pod in self._followed if pod in self._read_any)
