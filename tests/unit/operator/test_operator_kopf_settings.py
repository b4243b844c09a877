"""kopf's settings for the operator: what it asks of the API server depends on its scope."""

from __future__ import annotations

import kopf
import pytest

from k8slease.operator.handlers import LEASES, configure_kopf
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
