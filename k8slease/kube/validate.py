"""Kubernetes name rules, checked where options are given (errors name the option)."""

from __future__ import annotations

import re

from k8slease.errors import ConfigError

#: A Kubernetes DNS subdomain name (what a Lease's ``metadata.name`` must be).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: A DNS label (what a namespace must be).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: A label value: empty, or up to 63 characters of alphanumerics, ``-``, ``_`` and ``.``.
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def is_dns_subdomain(name: str) -> bool:
    """Whether ``name`` is a DNS subdomain name (Lease, ScheduledJobGroup and most object names)."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.match(name) is not None


def is_dns_label(name: str) -> bool:
    """Whether ``name`` is a DNS label (namespaces, job names)."""
    return len(name) <= 63 and _DNS_LABEL.match(name) is not None


def validate_lease_name(name: object) -> str:
    """Return ``name`` when it is a valid Lease name (DNS subdomain), else raise ``ConfigError``."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"Lease name must be a non-empty string, got {name!r}")
    if not is_dns_subdomain(name):
        raise ConfigError(
            f"Lease name {name!r} is not a DNS subdomain (lowercase alphanumerics, '-' and '.',"
            " at most 253 characters, starting and ending with an alphanumeric)"
        )
    return name


def validate_job_group(group: object) -> str:
    """Return ``group`` when it can name a job group (a Lease name without '.', since each job's
    lock Lease is ``<group>.<job>``), else raise ``ConfigError``."""
    name = validate_lease_name(group)
    if "." in name:
        raise ConfigError(f"group {name!r} must not contain '.' (job Leases are <group>.<job>)")
    return name


def validate_namespace(namespace: object) -> str:
    """Return ``namespace`` when it is a valid namespace name (DNS label), else raise."""
    if not isinstance(namespace, str) or not is_dns_label(namespace):
        raise ConfigError(f"namespace {namespace!r} is not a DNS label")
    return namespace


def validate_label_value(value: object, *, what: str) -> str:
    """Return ``value`` when it can be a Kubernetes label value, else raise ``ConfigError``."""
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ConfigError(f"{what} {value!r} cannot be a label value (<= 63 characters)")
    return value
