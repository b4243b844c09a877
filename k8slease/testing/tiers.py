"""Which API servers the pytest fixtures run tests on: embedded, the real control plane, both.

Chosen once per session from ``--k8s-server``, a real cluster's kubeconfig, the ``CI``
variable, and whether the real control plane can exist here (Go, or binaries in the cache).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

EMBEDDED = "embedded"
REAL = "real"
EXTERNAL = "external"
CHOICES = (EMBEDDED, REAL, "both")
NOT_RUN = "the real control plane tier is not run"


@dataclass(frozen=True)
class Tiers:
    """The servers ``k8s_apiserver`` is parametrized over, and the policy for the real one."""

    servers: tuple[str, ...]
    #: Why the real control plane is not among ``servers`` (None when it is).
    real_skipped: str | None = None
    #: A real control plane that cannot be built or started is an error, not a skip.
    real_required: bool = False

    @property
    def real(self) -> bool:
        return REAL in self.servers


def on_ci() -> bool:
    """Whether the ``CI`` environment variable says we run in continuous integration."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def choose(option: str | None, external_kubeconfig: str | None, real_possible: str | None) -> Tiers:
    """The tiers for a session.

    ``option`` is ``--k8s-server`` (None when not given); ``external_kubeconfig`` a real
    cluster opted into; ``real_possible`` is None when the real control plane can be built or
    is cached, else the reason it cannot.
    """
    if option is not None and option not in CHOICES:
        raise ValueError(f"--k8s-server must be one of {', '.join(CHOICES)}, got {option!r}")
    if external_kubeconfig:
        if option not in (None, EMBEDDED):
            raise ValueError(
                f"--k8s-server={option} cannot be combined with a real cluster's kubeconfig "
                f"({external_kubeconfig}): the fixtures already use that cluster"
            )
        return Tiers(
            (EXTERNAL,),
            real_skipped=f"{NOT_RUN}: the fixtures use the cluster of {external_kubeconfig}",
        )
    if option == EMBEDDED:
        return Tiers((EMBEDDED,), real_skipped=f"{NOT_RUN} (--k8s-server=embedded)")
    if option == REAL:
        return Tiers((REAL,), real_required=True)
    if option == "both":
        return Tiers((EMBEDDED, REAL), real_required=True)
    if real_possible is not None:
        return Tiers((EMBEDDED,), real_skipped=real_possible)
    return Tiers((EMBEDDED, REAL), real_required=on_ci())
