"""``python -m k8slease cluster [--kubeconfig PATH] [--build-only]``: a single-node cluster.

Starts the whole cluster (building, once per machine, whatever is not cached), prints one line
with the admin kubeconfig's path once the node is Ready, and on SIGINT/SIGTERM stops
everything, leaving no process, mount, link or cgroup. ``--build-only`` builds (or finds)
every binary and image, prints where they are, and exits. Where the cluster cannot run (not
root, no namespaces, no Go), it says why in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import threading

from k8slease.testing.controlplane.build import ensure_binaries
from k8slease.testing.controlplane.certs import CertificateError
from k8slease.testing.controlplane.gotool import BuildError
from k8slease.testing.launch import (
    kubeconfig_refused,
    print_built,
    serve_until_signalled,
    tier_parser,
)

from .build import ensure_node_binaries
from .host import ensure_packages, unavailable
from .images import ensure_app_image, ensure_pause_image
from .netns import NamespaceError
from .node import Cluster, ClusterError, ClusterUnavailable


def build_parser() -> argparse.ArgumentParser:
    return tier_parser(
        "cluster",
        "Run a single-node Kubernetes cluster (containerd, kubelet, control plane, CoreDNS; "
        "built from upstream) in a private network namespace until SIGINT/SIGTERM.",
        build_help=(
            "build every binary and image into the user cache if missing, print where, exit; "
            "'binaries' builds only the Go and C binaries (control plane and node: CPU-bound), "
            "'image' only the project's image (debootstrap and pip: network- and disk-bound), "
            "so that CI can run the two beside different work"
        ),
        build_parts=BUILD_PARTS,
    )


#: What ``--build-only`` builds: everything, or one of the two parts.
BUILD_PARTS = ("all", "binaries", "image")


def build_binaries() -> list[str]:
    """Build (or find) the control plane's and the node's binaries and the pause image."""
    node = ensure_node_binaries()
    plane = ensure_binaries()
    pause = ensure_pause_image(node, lambda line: None)
    return [str(plane.directory), str(node.directory), str(pause)]


def build_image() -> list[str]:
    """Build (or find) the project's image (and the Debian packages its build needs)."""
    ensure_packages()
    return [str(ensure_app_image())]


def build_all() -> list[str]:
    """Build (or find) everything the cluster and the e2e suite use; their paths.

    The image (debootstrap, then pip inside buildah: mostly downloads) builds in a thread
    beside the Go builds (mostly compiling); the node's Go builds come before the control
    plane's, whose lock they wait on only for the Kubernetes part.
    """
    ensure_packages()
    image: list[str] = []
    failed: list[BaseException] = []

    def image_part() -> None:
        try:
            image.append(str(ensure_app_image()))
        except BaseException as error:  # reported below, from the main thread
            failed.append(error)

    thread = threading.Thread(target=image_part, name="image-build")
    thread.start()
    try:
        binaries = build_binaries()
    finally:
        thread.join()
    if failed:
        raise failed[0]
    return [*binaries, *image]


def main(argv: list[str] | None = None) -> int:
    """Run the cluster; returns the exit code (0 after a clean SIGINT/SIGTERM, 2 for a usage
    error such as a ``--kubeconfig`` that is a directory, found before the host is checked or
    anything is built or started)."""
    args = build_parser().parse_args(argv)
    if kubeconfig_refused("cluster", args.kubeconfig):
        return 2
    reason = unavailable()
    if reason is not None:
        print(f"k8slease cluster: cannot run here: {reason}", flush=True)
        return 2
    if args.build_only is not None:
        build = {"all": build_all, "binaries": build_binaries, "image": build_image}
        return print_built("cluster", build[args.build_only], failure=BuildError)
    cluster = Cluster(kubeconfig=args.kubeconfig)
    return serve_until_signalled(
        "cluster",
        cluster,
        failures=[
            ((ClusterUnavailable,), 2, "cannot run here: "),
            ((BuildError, ClusterError, CertificateError, NamespaceError), 1, ""),
        ],
        ready=lambda: (
            f"cluster ready in {cluster.start_seconds:.1f} s (kubeconfig: "
            f"{cluster.kubeconfig}; logs: {cluster.directory / 'logs'})"
        ),
    )
