"""``python -m k8slease apiserver [--port N] [--kubeconfig PATH] [--no-auth]``: serve until
interrupted.

The kubeconfig is written only once the server answers requests, so a script can wait for
the file to appear and then use it. The URL is printed on stdout (one line, flushed).
"""

from __future__ import annotations

import argparse

from .launch import serve_until_signalled
from .server import APIServer


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        prog="k8slease apiserver",
        description="Serve the embedded Kubernetes API server on 127.0.0.1 until SIGINT/SIGTERM.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    parser.add_argument(
        "--kubeconfig", default=None, help="where to write the kubeconfig (default: a temp file)"
    )
    parser.add_argument(
        "--history-size", type=int, default=1000, help="watch window in events (default 1000)"
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="accept requests without the kubeconfig's bearer token (the Host and Origin checks "
        "stay on); for tools that cannot send a token",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server; returns the exit code (0 after a clean SIGINT/SIGTERM)."""
    args = build_parser().parse_args(argv)
    server = APIServer(
        args.port,
        kubeconfig=args.kubeconfig,
        history_size=args.history_size,
        auth=not args.no_auth,
    )
    return serve_until_signalled(
        "apiserver",
        server,
        failures=[((RuntimeError,), 1, "")],
        ready=lambda: f"serving {server.url} (kubeconfig: {server.kubeconfig})",
    )
