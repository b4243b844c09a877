"""The byte pump of the tests' TCP relays (tests/contract/contract_proxy.py, tests/peers/cutoff.py):
each copies one direction of a relayed connection on a thread of its own."""

from __future__ import annotations

import contextlib
import socket


def relay(source: socket.socket, sink: socket.socket) -> None:
    """Copy what ``source`` sends to ``sink`` until ``source`` ends or either socket fails."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
