"""Fixtures of the Kubernetes API conformance tests (the ``test_conformance_*.py`` modules; their
helpers are in conformance.py): a ``CoordinationV1Api`` and a served Widget CRD, both on
``k8s_apiserver``, so that the tests pass unchanged against a real cluster. (The embedded-only
tests of test_apiserver_embedded.py define a ``coord`` of their own, on a fresh embedded server.)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.integration.testing.conformance import widget_crd


@pytest.fixture
def coord(k8s_api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(k8s_api_client)


@pytest.fixture
def widgets(
    k8s_api_client: client.ApiClient, k8s_crd: Callable[[dict[str, Any]], dict[str, Any]]
) -> Iterator[tuple[client.CustomObjectsApi, str]]:
    """A served Widget CRD (unique group) and a CustomObjectsApi."""
    group = f"t{uuid.uuid4().hex[:8]}.k8slease.io"
    k8s_crd(widget_crd(group))
    yield client.CustomObjectsApi(k8s_api_client), group
