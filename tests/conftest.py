"""Shared set-up: ``--admission-policy`` installs the chart's admission policy on the real control
plane (tests/admission_policy.py); xdist's scheduler (tests/xdist_order.py). Every helper is
imported as a package module from the repository root (``tests.support.polling``,
``charts.render_manifests``): nothing here or elsewhere under tests/ edits ``sys.path``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from k8slease.testing import tiers
from tests import admission_policy, xdist_order


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("k8slease").addoption(
        admission_policy.OPTION,
        action="store_true",
        default=False,
        help="install the chart's ValidatingAdmissionPolicy on the real control plane for the "
        "whole session (tests/admission_policy.py says what it exercises)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(xdist_order.UnitClock(config), "k8slease-unit-clock")
    config.addinivalue_line(
        "markers",
        "admission_refuses(reason): the test plants what the chart's admission policy rightly "
        "refuses (a hostile Lease); skipped on [real] under --admission-policy, with the reason",
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` as tests/xdist_order.py refines it: longest work units first."""
    if config.option.dist != "loadfile":
        return None
    return xdist_order.make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker to order its collection for that scheduler (a worker's own
    ``option.dist`` is always ``no``)."""
    node.workerinput[xdist_order.WORKER_FLAG] = node.config.option.dist == "loadfile"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config, "workerinput", {}).get(xdist_order.WORKER_FLAG):
        xdist_order.order_items(config, items)
    if not config.getoption(admission_policy.OPTION):
        return
    for item in items:
        mark = item.get_closest_marker("admission_refuses")
        callspec = getattr(item, "callspec", None)
        on_real = callspec is not None and callspec.params.get("k8s_apiserver") == tiers.REAL
        if mark is not None and (on_real or "k8s_real_apiserver" in item.fixturenames):
            reason = mark.args[0] if mark.args else mark.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"the admission policy refuses it: {reason}"))


@pytest.fixture(scope="session")
def k8s_real_apiserver(k8s_real_apiserver: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The plugin's real control plane, with the chart's admission policy installed when
    ``--admission-policy`` is given."""
    if not request.config.getoption(admission_policy.OPTION):
        yield k8s_real_apiserver
        return
    admin = k8s_real_apiserver.api_client()
    try:
        installed = admission_policy.install(admin)
        yield k8s_real_apiserver
        admission_policy.uninstall(admin, installed)
    finally:
        admin.close()
