"""Fixtures of the client-go interop tests: the built peer (or a skip) and its processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.peers.peerproc import PeerProcess, PeerUnavailable, Timing, build_clientgo

Spawn = Callable[[str, str], PeerProcess]


@pytest.fixture(scope="session", name="clientgo_binary")
def clientgo_binary_fixture() -> Path:
    """The client-go peer, built by ``make peers``; the test is skipped where Go is missing."""
    try:
        return build_clientgo()
    except PeerUnavailable as exc:
        pytest.skip(f"client-go interop needs Go: {exc}")


def peer_spawner(
    server: Any, namespace: str, lease: str, timing: Timing, logs: Path
) -> tuple[Spawn, list[PeerProcess]]:
    """A function starting peers (kind, identity) on one Lease, and the list of those started."""
    started: list[PeerProcess] = []

    def spawn(kind: str, identity: str) -> PeerProcess:
        peer = PeerProcess(kind, kubeconfig=Path(server.kubeconfig), namespace=namespace,
                           lease=lease, identity=identity, timing=timing,
                           stderr_dir=logs)  # fmt: skip
        started.append(peer)
        return peer

    return spawn, started


@pytest.fixture(name="peers")
def peers_fixture(
    clientgo_binary: Path, k8s_apiserver: Any, k8s_namespace: str, tmp_path: Path
) -> Iterator[tuple[Spawn, list[PeerProcess]]]:
    """Start peers on the Lease ``interop`` of a fresh namespace; all are killed afterwards."""
    spawn, started = peer_spawner(k8s_apiserver, k8s_namespace, "interop", Timing(), tmp_path)
    try:
        yield spawn, started
    finally:
        for peer in started:
            peer.close()
