"""Election timings shared by several test files (``tests.support.timing``), each defined once.

A name stands for one set of numbers; files that use different numbers keep their own
constants (a test's timing is part of what it checks). Treat these as read-only: copy with
``{**X, ...}`` to vary one field.
"""

from __future__ import annotations

from typing import Any, Final

#: operator and RBAC tests on either server: a 2 s lease renewed every 0.3 s, so a step-down,
#: a takeover or a missed renewal shows within seconds
OPERATOR_FAST: Final = {
    "lease_duration": 2,
    "renew_interval": 0.3,
    "renew_deadline": 1.2,
    "retry_interval": 0.3,
}

#: Jobs groups whose LEADER jobs must move or stop within a few seconds (retry at the default)
JOBS_FAST: Final = {"lease_duration": 2.0, "renew_interval": 0.5, "renew_deadline": 1.5}

#: electors on the in-memory Lease store of tests/unit/election (namespace included)
MEMORY_FAST: Final[dict[str, Any]] = {
    "namespace": "default",
    "lease_duration": 2,
    "renew_interval": 0.3,
    "renew_deadline": 1.0,
    "retry_interval": 0.5,
}

#: a cron schedule that does not fire while a test runs (midnight on 1 January): the test
#: fires its ticks itself (``Jobs.fire``)
NEVER: Final = "0 0 1 1 *"
