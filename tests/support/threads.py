"""Calls that must return on their own (``tests.support.threads``)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def returns_within(call: Callable[[], object], seconds: float) -> bool:
    """Run ``call`` on a daemon thread; whether it returned within ``seconds``. For a blocking
    call that must end by itself (``LeaderElector.run`` once its work has returned): a call
    that does not return is left behind on its daemon thread and the test fails, not hangs."""
    runner = threading.Thread(target=call, daemon=True)
    runner.start()
    runner.join(timeout=seconds)
    return not runner.is_alive()
