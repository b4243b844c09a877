"""A DNS query for A records, enough to check that the node's CoreDNS answers (stdlib only).

The query is sent from inside the node's network namespace by a one-line Python program
(:data:`SEND`); building the question and reading the answer happen here, where they can be
tested.
"""

from __future__ import annotations

import struct

#: Run inside the node's namespaces as ``python -c SEND <query hex> <server>``: sends the query
#: over UDP to port 53 of ``server``, prints the reply in hex (a timeout after 2 s: an error).
SEND = (
    "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2);"
    "s.sendto(bytes.fromhex(sys.argv[1]),(sys.argv[2],53));print(s.recv(4096).hex())"
)
_A, _IN = 1, 1


def a_query(name: str, *, ident: int = 0x6B38) -> bytes:
    """A recursion-desired question for ``name``'s A records (RFC 1035, 4.1)."""
    labels = [label for label in name.rstrip(".").split(".") if label]
    if not labels or any(len(label.encode()) > 63 for label in labels):
        raise ValueError(f"not a DNS name: {name!r}")
    question = b"".join(bytes([len(p.encode())]) + p.encode() for p in labels) + b"\0"
    return (
        struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", _A, _IN)
    )


def a_records(reply: bytes) -> list[str]:
    """The IPv4 addresses of the A records answering ``reply``'s question; ``ValueError`` for a
    reply that is not one (too short, an error code, a truncated record)."""
    if len(reply) < 12:
        raise ValueError("a DNS reply has a 12-byte header")
    _, flags, questions, answers = struct.unpack(">HHHH", reply[:8])
    if not flags & 0x8000 or flags & 0x000F:
        raise ValueError(f"not an answer, or an error (rcode {flags & 0x000F})")
    at = 12
    for _ in range(questions):
        at = _skip_name(reply, at) + 4
    found: list[str] = []
    for _ in range(answers):
        at = _skip_name(reply, at)
        if at + 10 > len(reply):
            raise ValueError("a truncated record")
        kind, klass, _, length = struct.unpack(">HHIH", reply[at : at + 10])
        at += 10
        data = reply[at : at + length]
        if len(data) != length:
            raise ValueError("a truncated record")
        if (kind, klass, length) == (_A, _IN, 4):
            found.append(".".join(str(b) for b in data))
        at += length
    return found


def _skip_name(reply: bytes, at: int) -> int:
    """The offset after the (possibly compressed) name at ``at``."""
    while True:
        if at >= len(reply):
            raise ValueError("a name runs past the reply")
        length = reply[at]
        if length & 0xC0 == 0xC0:  # a pointer ends the name
            return at + 2
        if length == 0:
            return at + 1
        at += 1 + length
