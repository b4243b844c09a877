"""Kubernetes name rules: one validator for every option that becomes a name."""

from __future__ import annotations

import pytest

from k8slease.errors import ConfigError
from k8slease.kube.validate import (
    is_dns_label,
    is_dns_subdomain,
    validate_label_value,
    validate_lease_name,
    validate_namespace,
)


@pytest.mark.parametrize("name", ["a", "billing", "billing.nightly-invoices", "a" * 253])
def test_dns_subdomains(name: str) -> None:
    assert is_dns_subdomain(name)
    assert validate_lease_name(name) == name


@pytest.mark.parametrize("name", ["", "Billing", "-a", "a-", "a..b", "a_b", "a" * 254])
def test_not_dns_subdomains(name: str) -> None:
    assert not is_dns_subdomain(name)
    with pytest.raises(ConfigError, match="Lease name"):
        validate_lease_name(name)


def test_dns_labels_are_short_and_have_no_dots() -> None:
    assert is_dns_label("a" * 63) and not is_dns_label("a" * 64)
    assert not is_dns_label("a.b")
    assert validate_namespace("default") == "default"
    with pytest.raises(ConfigError, match=r"namespace 'a\.b'"):
        validate_namespace("a.b")


def test_label_values_name_the_option() -> None:
    assert validate_label_value("", what="group") == ""
    with pytest.raises(ConfigError, match=r"group 'a b'"):
        validate_label_value("a b", what="group")
