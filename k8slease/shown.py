"""Other processes' strings made safe to print: escaped and cut to a bounded length.

A Lease is written by whoever may write Leases in the namespace, so its holder identity, its
job names and its annotations are foreign input. Printed raw, a holder identity such as
``"\\x1b[2J\\x1b]0;owned\\x07"`` clears the operator's terminal and retitles it, a ``"\\n"``
forges a log line, and a 1 MB identity is logged in full by every replica at each change. Every
place that shows such a string to a terminal or a log line passes it through :func:`shown`.
"""

from __future__ import annotations

__all__ = ["LIMIT", "shown"]

#: Default bound on a shown string, in characters of the original (a DNS-1123 subdomain, the
#: longest Kubernetes name, is 253; a holder identity ``<pod>_<uuid>`` is under 100).
LIMIT = 256


_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(value: object, *, limit: int = LIMIT) -> str:
    """``value`` as one printable line: no control character, no ANSI escape, no newline.

    Characters that are not printable (C0/C1 controls, ESC, DEL, line and paragraph separators,
    bidirectional overrides and other format characters) are written as Python-style escapes
    (``\\n``, ``\\x1b``, ``\\u202e``) and a backslash as ``\\\\``, so the original can be read back
    unambiguously. Space stays a space. Past ``limit`` characters the rest is cut and the line
    says how much: ``...(+1048320 chars)``.
    """
    text = value if isinstance(value, str) else str(value)
    cut = len(text) - limit if len(text) > limit else 0
    head = text[:limit] if cut else text
    out = head if head.isprintable() and "\\" not in head else "".join(map(_escape, head))
    return f"{out}...(+{cut} chars)" if cut else out
