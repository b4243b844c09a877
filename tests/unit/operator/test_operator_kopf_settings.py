"""kopf's settings for the operator: what it asks of the API server depends on its scope."""

from __future__ import annotations

import kopf
import pytest

from k8slease.names import LABEL_GROUP
from k8slease.operator.command import settings_from_args
from k8slease.operator.handlers import LEASES, PODS, configure_kopf, read_journals_configured
from k8slease.operator.settings import OperatorConfig


@pytest.mark.parametrize(
    ("ops", "scanning_disabled"),
    [
        (OperatorConfig(namespaces=("team-a",)), True),
        (OperatorConfig(namespaces=("team-a", "team-b")), True),
        (OperatorConfig(all_namespaces=True), False),
    ],
)
def test_namespaced_operator_does_not_scan_the_cluster(
    ops: OperatorConfig, scanning_disabled: bool
) -> None:
    """A namespaced operator has no cluster-scoped RBAC (the chart grants none): kopf must not
    list Namespaces and CRDs, or it retries each 403 for about a minute before it starts.
    Cluster-wide, the ClusterRole lets it watch CRDs, so it keeps noticing them change."""
    settings = kopf.OperatorSettings()
    configure_kopf(settings, ops)
    assert settings.scanning.disabled is scanning_disabled
    assert settings.peering.standalone is True
    assert settings.posting.enabled is False
    assert settings.watching.label_selectors[LEASES]


def test_pods_are_watched_only_with_the_group_label() -> None:
    settings = kopf.OperatorSettings()
    configure_kopf(settings, OperatorConfig(namespaces=("team-a",)))
    assert settings.watching.label_selectors[PODS] == LABEL_GROUP


@pytest.mark.parametrize(
    ("value", "reads"),
    [(None, True), ("true", True), ("1", True), ("false", False), ("off", False), ("0", False)],
)
def test_journal_reading_is_on_unless_turned_off(value: str | None, reads: bool) -> None:
    env = {} if value is None else {"K8SLEASE_OPERATOR_READ_JOURNALS": value}
    assert read_journals_configured(env) is reads
    assert OperatorConfig.from_env(env).read_journals is reads


def test_no_read_journals_turns_it_off() -> None:
    assert settings_from_args([]).read_journals is True
    assert settings_from_args(["--no-read-journals"]).read_journals is False


def test_the_pod_handler_is_registered_while_journals_are_read() -> None:
    """The handlers module registers it at import (``k8slease operator`` sets the variable
    first): kopf then watches the groups' Pods; without it, kopf asks nothing of Pods."""
    registry = kopf.get_default_registry()
    handlers = registry._watching.get_all_handlers()
    watched = {(h.selector.group, h.selector.any_name or h.selector.plural) for h in handlers}
    assert ("", "pods") in watched
