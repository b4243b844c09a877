"""The real-server RBAC tests' reading of an operator log: a refusal is a 403 status or the word
"forbidden", not the digits 403 inside a log time, a duration, a resourceVersion or a name (a CI
run failed on ``06:35:07,403 INFO ... reason=LeaderElected``)."""

from __future__ import annotations

import pytest

from tests.realserver.operator_runs import REFUSED


@pytest.mark.parametrize(
    "line",
    [
        "WARNING k8slease.operator event.failed status=403 reason=Forbidden",
        "kubernetes.client.exceptions.ApiException: (403)",
        "aiohttp.client_exceptions.ClientResponseError: 403, message='Forbidden', url='...'",
        'leases.coordination.k8s.io "x" is forbidden: User "system:serviceaccount:a:b" cannot',
        "status 403 from the API server",
    ],
)
def test_a_refusal_is_recognised(line: str) -> None:
    assert REFUSED.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "2026-12-02 06:35:07,403 INFO k8slease.operator operator.event namespace=rbac-2fef4a "
        "group=observed type=Normal reason=LeaderElected message='replica-a became leader'",
        "lease renewed in 0.403 s",
        "resourceVersion=14032 holder=replica-a",
        "namespace=rbac-403f1e group=observed",
        "took 12:01:403 of the budget",
    ],
)
def test_digits_inside_other_values_are_not_a_refusal(line: str) -> None:
    assert not REFUSED.search(line)
