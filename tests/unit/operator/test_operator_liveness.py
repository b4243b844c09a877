"""Issue 23: the operator's liveness probe fails while its write loop or Lease handler is dead.

Each is killed by an injected exception: the write loop's planning (restarted after
``evaluate_interval``) and the Lease handler (each event folded anew) fail kopf's probe until they
work again; a write loop that ended fails it for good.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from k8slease.operator.handlers import RUNTIME_KEY, operator_alive
from k8slease.operator.settings import OperatorConfig
from k8slease.operator.writeloop import OperatorRuntime
from tests.unit.operator.operator_helpers import group_object, leader_lease


class Injected(RuntimeError):
    pass


def _probe(runtime: OperatorRuntime) -> str:
    return operator_alive(memo=kopf.Memo({RUNTIME_KEY: runtime}))  # type: ignore[arg-type]


def test_a_failing_lease_handler_fails_the_probe_until_an_event_folds_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        runtime = OperatorRuntime(OperatorConfig(), api_client=object())  # type: ignore[arg-type]
        await runtime.start()
        try:
            assert _probe(runtime) == "ok"
            original = runtime.registry.on_lease

            def boom(*args: Any, **kwargs: Any) -> Any:
                raise Injected("injected into the Lease handler")

            monkeypatch.setattr(runtime.registry, "on_lease", boom)
            with pytest.raises(Injected):
                runtime.on_lease("ADDED", leader_lease("billing", "a", renew=0))
            with pytest.raises(kopf.PermanentError, match="lease-handler"):
                _probe(runtime)
            monkeypatch.setattr(runtime.registry, "on_lease", original)
            runtime.on_lease("ADDED", leader_lease("billing", "a", renew=1))
            assert _probe(runtime) == "ok"
        finally:
            await runtime.stop()
        with pytest.raises(kopf.PermanentError):
            _probe(runtime)  # the write loop has ended: dead for good

    asyncio.run(scenario())


def test_a_failing_write_loop_fails_the_probe_until_a_plan_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        settings = OperatorConfig(flush_interval=0.01, evaluate_interval=0.05)
        runtime = OperatorRuntime(settings, api_client=object())  # type: ignore[arg-type]
        original = runtime.registry.plan
        failed = asyncio.Event()
        planned_again = asyncio.Event()

        def boom(*args: Any, **kwargs: Any) -> Any:
            failed.set()
            raise Injected("injected into the write loop")

        def plan(*args: Any, **kwargs: Any) -> Any:
            if failed.is_set():
                planned_again.set()
            return original(*args, **kwargs)

        monkeypatch.setattr(runtime.registry, "plan", boom)
        await runtime.start()
        try:
            runtime.on_object("ADDED", group_object("billing"))
            await asyncio.wait_for(failed.wait(), timeout=10)
            with pytest.raises(kopf.PermanentError, match="writer"):
                _probe(runtime)
            monkeypatch.setattr(runtime.registry, "plan", plan)
            await asyncio.wait_for(planned_again.wait(), timeout=10)
            assert _probe(runtime) == "ok"
        finally:
            await runtime.stop()

    asyncio.run(scenario())
