"""``python -m k8slease apiserver [--port N] [--kubeconfig PATH] [--no-auth]``: serve until
interrupted.

The kubeconfig is written only once the server answers requests, so a script can wait for
the file to appear and then use it. The URL is printed on stdout (one line, flushed).
"""

from __future__ import annotations

import argparse

from .launch import kubeconfig_refused, serve_until_signalled
from .server import APIServer


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        prog="k8slease apiserver",
        description="Serve the embedded Kubernetes API server on 127.0.0.1 until SIGINT/SIGTERM.",
    )
    parser.add_argument("--port", type=_port, default=0, help="port to bind (default: a free one)")
    parser.add_argument(
        "--kubeconfig", default=None, help="where to write the kubeconfig (default: a temp file)"
    )
    parser.add_argument(
        "--history-size",
        type=_history_size,
        default=1000,
        help="watch window in events (default 1000)",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="accept requests without the kubeconfig's bearer token (the Host and Origin checks "
        "stay on); for tools that cannot send a token",
    )
    return parser


def _integer(text: str, low: int, high: int | None = None) -> int:
    """``text`` as an int in ``[low, high]``; else argparse's usage error (argparse names the
    option: ``argument --port: must be ...``)."""
    wanted = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {value}")
    return value


def _port(text: str) -> int:
    return _integer(text, 0, 65535)


def _history_size(text: str) -> int:
    return _integer(text, 1)


def main(argv: list[str] | None = None) -> int:
    """Run the server; returns the exit code (0 after a clean SIGINT/SIGTERM, 2 for a usage
    error such as a ``--kubeconfig`` that is a directory)."""
    args = build_parser().parse_args(argv)
    if kubeconfig_refused("apiserver", args.kubeconfig):
        return 2
    server = APIServer(
        args.port,
        kubeconfig=args.kubeconfig,
        history_size=args.history_size,
        auth=not args.no_auth,
    )
    return serve_until_signalled(
        "apiserver",
        server,
        # an OSError of start() is the kubeconfig's write (the server was stopped, the
        # temporary file removed): a path the checks above could not foresee
        failures=[((RuntimeError,), 1, ""), ((OSError,), 2, "cannot write the kubeconfig: ")],
        ready=lambda: f"serving {server.url} (kubeconfig: {server.kubeconfig})",
    )
