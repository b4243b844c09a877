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


#: The longest job group name: it is written as a label value (``k8slease.io/group``).
MAX_GROUP_LENGTH = 63


def validate_job_group(group: object) -> str:
    """Return ``group`` when it can name a job group, else raise ``ConfigError``: a Lease name
    without '.' (each job's lock Lease is ``<group>.<job>``) that is also a label value (the
    ``k8slease.io/group`` label of every Lease and Event of the group), so at most 63 characters.
    With a job name (a DNS label) the lock Lease's name is then always valid (at most 127)."""
    if not isinstance(group, str) or not group:
        raise ConfigError(f"group must be a non-empty string, got {group!r}")
    if len(group) > MAX_GROUP_LENGTH:
        raise ConfigError(
            f"group {group!r} is {len(group)} characters long; at most {MAX_GROUP_LENGTH}: it is"
            " written as the label value k8slease.io/group and starts each job's Lease name"
            " <group>.<job>"
        )
    if "." in group:
        raise ConfigError(f"group {group!r} must not contain '.' (job Leases are <group>.<job>)")
    if not is_dns_label(group):
        raise ConfigError(
            f"group {group!r} is not a DNS label (lowercase alphanumerics and '-', starting and"
            " ending with an alphanumeric): it names the group's Leases"
        )
    return group


def validate_namespace(namespace: object) -> str:
    """Return ``namespace`` when it is a valid namespace name (DNS label), else raise."""
    if not isinstance(namespace, str) or not is_dns_label(namespace):
        raise ConfigError(f"namespace {namespace!r} is not a DNS label")
    return namespace


def optional_namespace(namespace: object) -> str | None:
    """``None`` (the caller applies the default namespace) or ``namespace`` validated: a
    namespace given explicitly must be one (``""`` or ``0`` is an error, not the default)."""
    if namespace is None:
        return None
    if not isinstance(namespace, str) or not is_dns_label(namespace):
        raise ConfigError(
            f"namespace {namespace!r} is not a DNS label (lowercase alphanumerics and '-', at most"
            " 63 characters); pass None (the default) for the default namespace"
        )
    return namespace


def validate_label_value(value: object, *, what: str) -> str:
    """Return ``value`` when it can be a Kubernetes label value, else raise ``ConfigError``."""
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ConfigError(f"{what} {value!r} cannot be a label value (<= 63 characters)")
    return value


def election_group(name: str, group: object) -> str:
    """The ``k8slease.io/group`` label value of an election's Lease: ``group``, or the Lease
    ``name`` when ``group`` is ``None``; ``ConfigError`` naming what was given otherwise."""
    if group is None:
        if len(name) > 63:
            raise ConfigError(
                f"Lease name {name!r} is {len(name)} characters long: without group= it is also"
                " the k8slease.io/group label value (at most 63 characters); pass group=..."
            )
        return name
    if group == "":
        raise ConfigError("group must not be empty; pass None (the default) for the Lease name")
    return validate_label_value(group, what="group")
