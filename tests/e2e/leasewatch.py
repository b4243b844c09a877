"""Every change of the group's leader Lease, as ``kubectl get lease -w`` reports it.

From the sequence of (holder, acquireTime, renewTime) it computes the handovers (the holder
changed to another non-empty holder, with or without a release in between) and, for each, the
leadership gap: the new holder's ``acquireTime`` minus the old holder's last ``renewTime``
(its last renewal, or the release it wrote on SIGTERM). Both times are the electors' own
MicroTime stamps, so the gap does not depend on when this watcher saw the changes.
"""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

_FORMAT = "jsonpath={.spec.holderIdentity}{'|'}{.spec.acquireTime}{'|'}{.spec.renewTime}{'\\n'}"


def _time(text: str) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


@dataclass(frozen=True)
class Observation:
    holder: str
    acquired: datetime | None
    renewed: datetime | None


@dataclass(frozen=True)
class Handover:
    old: str
    new: str
    gap_seconds: float


class LeaseWatch:
    """Watches one Lease from a background ``kubectl get -w``."""

    def __init__(self, kubectl: Path | str, kubeconfig: Path, namespace: str, name: str) -> None:
        env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        self._process = subprocess.Popen(
            [str(kubectl), "get", "lease", name, "-n", namespace, "-w", "-o", _FORMAT],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._seen: list[Observation] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="leasewatch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            holder, _, rest = line.strip().partition("|")
            acquired, _, renewed = rest.partition("|")
            with self._lock:
                self._seen.append(Observation(holder, _time(acquired), _time(renewed)))

    def close(self) -> None:
        self._process.terminate()
        self._process.wait()
        self._thread.join(5)

    def observations(self) -> list[Observation]:
        with self._lock:
            return list(self._seen)

    def handovers(self) -> list[Handover]:
        """Each change of holder to a different, non-empty holder, with its gap."""
        found: list[Handover] = []
        last: Observation | None = None  # the last observation with a non-empty holder
        released: Observation | None = None
        for seen in self.observations():
            if not seen.holder:
                released = seen
                continue
            if last is not None and seen.holder != last.holder and seen.acquired is not None:
                end = released.renewed if released is not None else last.renewed
                assert end is not None
                found.append(
                    Handover(last.holder, seen.holder, (seen.acquired - end).total_seconds())
                )
            last, released = seen, None
        return found
