"""``python -m k8slease`` / ``k8slease``: one entry point, a subcommand per module.

Each subcommand's module owns its own argument parsing through ``main(argv) -> int`` and is
imported only when that subcommand runs, so ``k8slease status`` does not import kopf.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: subcommand -> (module with ``main(argv) -> int``, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "apiserver": ("k8slease.testing.serve", "serve the embedded Kubernetes API server"),
    "controlplane": (
        "k8slease.testing.controlplane.serve",
        "run a real etcd + kube-apiserver (built from upstream) on 127.0.0.1",
    ),
    "operator": ("k8slease.operator.run", "run the ScheduledJobGroup operator"),
    "demo": (
        "k8slease.cli.demo",
        "run replicas, the operator and a failover on the embedded server",
    ),
    "status": ("k8slease.cli.status", "show groups, leaders, failovers and last runs"),
}


def _usage() -> str:
    lines = ["usage: k8slease COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<12} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines.append("")
    lines.append("Run 'k8slease COMMAND --help' for a command's options.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"k8slease: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    if command != "operator":  # the operator configures its logging from --log-level
        from k8slease.cli.console import configure_console_logging

        configure_console_logging()
    module = importlib.import_module(COMMANDS[command][0])
    result: int = module.main(rest)
    return result
