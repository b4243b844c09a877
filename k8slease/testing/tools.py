"""Running a short command to its end, its output captured, and wording its failure.

The testing tiers call many tools that way (``openssl``, ``go``, ``nsenter``, ``ctr``,
``kubectl``, ``helm``, ``apt-get``, ``cc``): :func:`run_tool` is the one place that captures their
output as text and, when the caller names the error to raise, says what failed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

#: How much of a failed command's output its error carries (the end, where the cause is).
COMPLAINT_CHARS = 2000


def complaint(result: subprocess.CompletedProcess[str]) -> str:
    """What a command said when it failed: its stderr, or its stdout when stderr is empty
    (the last :data:`COMPLAINT_CHARS` characters)."""
    return (result.stderr.strip() or result.stdout.strip())[-COMPLAINT_CHARS:]


def run_tool(
    argv: Sequence[str],
    *,
    timeout: float | None,
    failure: type[Exception] | None = None,
    what: str = "",
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end (or ``timeout``), stdout and stderr captured as text.

    Without ``failure`` the caller reads the exit status. With it, a non-zero status raises
    ``failure("<what> failed (<status>): <complaint>")``; ``what`` defaults to the command
    line.
    """
    result = subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=timeout, env=env, input=input
    )
    if failure is not None and result.returncode != 0:
        raise failure(f"{what or ' '.join(argv)} failed ({result.returncode}): {complaint(result)}")
    return result
