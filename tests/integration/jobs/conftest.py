"""Fixtures of the Jobs integration tests."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.support.factories import JobsFactory, make_jobs


@pytest.fixture
def new_jobs(k8s_api_client: Any, k8s_namespace: str) -> JobsFactory:
    """:func:`tests.support.factories.make_jobs` bound to this test's API client and namespace:
    ``new_jobs(group, identity=..., **options)``."""
    return partial(make_jobs, api_client=k8s_api_client, namespace=k8s_namespace)
