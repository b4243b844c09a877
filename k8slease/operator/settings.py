"""The operator's settings: one object, passed around, no module globals."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from k8slease.errors import ConfigError
from k8slease.kube.validate import is_dns_label, is_dns_subdomain

#: Environment variables read by :meth:`OperatorConfig.from_env` (used under ``kopf run``).
ENV_PREFIX = "K8SLEASE_OPERATOR_"


#: The longest group name the operator can create a ScheduledJobGroup for: the object is named
#: after the group, which is also the ``k8slease.io/group`` label value (at most 63 characters).
MAX_GROUP_NAME = 63


def check_auto_create_group(entry: str, *, source: str) -> str:
    """``entry`` when it can declare groups for auto-creation (``GROUP``, ``NAMESPACE/GROUP``,
    ``*`` or ``NAMESPACE/*``), else a ``ConfigError`` naming ``source``: an entry that matches
    no group would be ignored without a word."""
    namespace, slash, group = entry.rpartition("/")
    namespace_ok = not slash or is_dns_label(namespace)
    group_ok = group == "*" or (len(group) <= MAX_GROUP_NAME and is_dns_subdomain(group))
    if not (namespace_ok and group_ok):
        raise ConfigError(
            f"{source}={entry!r} is not GROUP, NAMESPACE/GROUP, '*' or 'NAMESPACE/*' (a namespace"
            " is a DNS label; a group a DNS subdomain name of at most"
            f" {MAX_GROUP_NAME} characters, as its ScheduledJobGroup is named after it)"
        )
    return entry


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """How the operator watches, writes and alerts.

    Named apart from kopf's ``kopf.OperatorSettings``, which the operator's start-up handler
    receives beside it: this object is k8slease's options, that one is kopf's machinery.

    Intervals are in seconds. ``namespaces`` empty with ``all_namespaces`` False means the
    namespace of the kubeconfig context (or ``default``).
    """

    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    kubeconfig: str | None = None
    #: Create a ScheduledJobGroup for a group that has live Leases but no object, when the group
    #: opted in (a Lease labelled ``k8slease.io/auto-create=true``) or is declared below.
    auto_create: bool = True
    #: Groups declared for auto-creation without the label: ``group`` or ``namespace/group``
    #: (``*`` and ``namespace/*``: every group, for namespaces whose Lease writers are trusted).
    auto_create_groups: tuple[str, ...] = ()
    #: At most this many auto-created ScheduledJobGroups per namespace (any app that may write
    #: Leases could otherwise make the operator create objects at will).
    auto_create_limit: int = 20
    #: A Lease renewed within this many seconds (or held) makes its group "live".
    auto_create_max_age: float = 3600.0
    #: How often the write loop runs: the latency floor from a Lease change to a status write.
    flush_interval: float = 0.1
    #: At most one status write per group per this many seconds.
    min_write_interval: float = 0.25
    #: After a failed status write the group waits this long before the next try, doubling
    #: with every further failure (with jitter) up to ``write_backoff_max``.
    write_backoff_initial: float = 0.5
    write_backoff_max: float = 60.0
    #: Renewal-only changes (lastRenewTime, expiry) are written at most this often per group.
    renew_write_interval: float = 30.0
    #: Every group is evaluated again this often (expired Leases, missed runs).
    evaluate_interval: float = 5.0
    #: Concurrent API calls made by the write loop.
    max_concurrency: int = 8
    #: Events posted per group per pass, at most (the newest ones).
    max_events_per_pass: int = 5
    #: Per-request timeout for the operator's own API calls.
    request_timeout: float = 10.0
    #: Component name on the Events the operator posts.
    event_component: str = "k8slease-operator"
    log_level: str = "INFO"
    #: Read the journals of ended replica containers (Pods labelled ``k8slease.io/group``) and
    #: merge the run records they kept into the job Leases (needs Pod read and Lease update).
    read_journals: bool = True
    #: How many times a journal's merge is tried (with the status writes' back-off) before the
    #: operator gives up on it and says so at ERROR.
    journal_tries: int = 12
    #: kopf's health endpoint (``--liveness``), e.g. ``http://0.0.0.0:8080/healthz``.
    liveness_endpoint: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in (
            "flush_interval",
            "evaluate_interval",
            "request_timeout",
            "write_backoff_initial",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0")
        for name in ("min_write_interval", "renew_write_interval", "auto_create_max_age"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0")
        if self.write_backoff_max < self.write_backoff_initial:
            raise ConfigError("write_backoff_max must be >= write_backoff_initial")
        if self.auto_create_limit < 0:
            raise ConfigError("auto_create_limit must be >= 0")
        if self.max_concurrency < 1 or self.max_events_per_pass < 1 or self.journal_tries < 1:
            raise ConfigError("max_concurrency, max_events_per_pass and journal_tries must be >= 1")
        if self.all_namespaces and self.namespaces:
            raise ConfigError("choose namespaces or all_namespaces, not both")
        for entry in self.auto_create_groups:
            check_auto_create_group(entry, source="auto_create_groups")

    def with_changes(self, **changes: Any) -> OperatorConfig:
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorConfig:
        """Settings from ``K8SLEASE_OPERATOR_*`` variables (e.g. ``..._AUTO_CREATE=false``)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or f.name == "extra":
                continue
            default = getattr(cls(), f.name)
            if isinstance(default, bool):
                word = raw.strip().lower()
                if word not in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
                    raise ConfigError(f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not true or false")
                values[f.name] = word in ("1", "true", "yes", "on")
            elif isinstance(default, int | float):
                kind = type(default)
                try:
                    values[f.name] = kind(raw)
                except ValueError:
                    what = "an integer" if kind is int else "a number"
                    raise ConfigError(
                        f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not {what}"
                    ) from None
            elif isinstance(default, tuple):
                values[f.name] = tuple(p for p in raw.replace(",", " ").split() if p)
            else:
                nullable = f.name in ("kubeconfig", "liveness_endpoint")
                values[f.name] = (raw or None) if nullable else raw
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad {ENV_PREFIX}* setting: {exc}") from None
