"""``python -m k8slease controlplane [--port N] [--kubeconfig PATH]``: serve until interrupted.

Starts etcd and kube-apiserver (building them first, once per machine), writes the admin
kubeconfig only once ``/readyz`` answers, prints the URL and the kubeconfig's path on stdout
(one line, flushed), and on SIGINT/SIGTERM stops both processes and removes their data.
``--build-only`` builds (or finds) the binaries, prints their directory and exits.
"""

from __future__ import annotations

import argparse

from ..launch import kubeconfig_refused, print_built, serve_until_signalled, tier_parser
from .build import ensure_binaries
from .certs import CertificateError
from .gotool import BuildError
from .plane import ControlPlane, ControlPlaneError


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    return tier_parser(
        "controlplane",
        "Run a real etcd + kube-apiserver on 127.0.0.1 until SIGINT/SIGTERM "
        "(RBAC, TLS, ServiceAccount tokens; no controller-manager, no scheduler).",
        port=_port,
        build_help="build the binaries into the user cache if missing, print where they are, exit",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be an integer, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 0 and 65535, got {port}")
    return port


def main(argv: list[str] | None = None) -> int:
    """Run the control plane; returns the exit code (0 after a clean SIGINT/SIGTERM, 2 for a
    usage error such as a ``--kubeconfig`` that is a directory, found before anything is built
    or started)."""
    args = build_parser().parse_args(argv)
    if kubeconfig_refused("controlplane", args.kubeconfig):
        return 2
    if args.build_only:
        return print_built(
            "controlplane", lambda: [ensure_binaries().directory], failure=BuildError
        )
    plane = ControlPlane(args.port, kubeconfig=args.kubeconfig)
    return serve_until_signalled(
        "controlplane",
        plane,
        failures=[((BuildError, ControlPlaneError, CertificateError), 1, "")],
        ready=lambda: (
            f"serving {plane.url} (kubeconfig: {plane.kubeconfig}; data: {plane.directory}; "
            f"ready in {plane.start_seconds:.1f} s)"
        ),
    )
