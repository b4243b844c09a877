"""``python -m k8slease`` / ``k8slease``: one entry point, a subcommand per module.

Each subcommand's module owns its own argument parsing through ``main(argv) -> int`` and is
imported only when that subcommand runs, so ``k8slease status`` does not import kopf. A
subcommand whose optional dependencies are missing ends with the ``pip install`` line that adds
them, not with a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from k8slease.cli.version import package_version

#: subcommand -> (module with ``main(argv) -> int``, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "apiserver": ("k8slease.testing.serve", "serve the embedded Kubernetes API server"),
    "controlplane": (
        "k8slease.testing.controlplane.serve",
        "run a real etcd + kube-apiserver (built from upstream) on 127.0.0.1",
    ),
    "cluster": (
        "k8slease.testing.cluster.serve",
        "run a single-node cluster (kubelet, containerd; built from upstream) as root",
    ),
    "operator": ("k8slease.operator.command", "run the ScheduledJobGroup operator"),
    "demo": (
        "k8slease.cli.demo",
        "run replicas, the operator and a failover on the embedded server",
    ),
    "status": ("k8slease.cli.status", "show groups, leaders, failovers and last runs"),
}

#: top-level module of an optional dependency -> the extra that installs it
EXTRAS: dict[str, str] = {
    "kopf": "operator",
    "aiohttp": "testing",
    "jsonschema": "testing",
    "yaml": "testing",
    "prometheus_client": "metrics",
}

#: the extra each subcommand needs, named in the hint
COMMAND_EXTRAS: dict[str, str] = {"apiserver": "testing", "operator": "operator", "demo": "demo"}


def _usage() -> str:
    lines = ["usage: k8slease [--version] COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<12} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines.append("")
    lines.append("Run 'k8slease COMMAND --help' for a command's options.")
    return "\n".join(lines)


def missing_extra_hint(command: str, exc: ModuleNotFoundError) -> str | None:
    """The message for a missing optional dependency, or None when ``exc`` is something else."""
    top = (exc.name or "").split(".")[0]
    extra = COMMAND_EXTRAS.get(command) or EXTRAS.get(top)
    if top not in EXTRAS or extra is None:
        return None
    return (
        f"k8slease {command}: the Python package {top!r} is not installed; "
        f"install it with: pip install 'k8slease[{extra}]'"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a subcommand; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"k8slease {package_version()}")
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"k8slease: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    if command != "operator":  # the operator configures its logging from --log-level
        from k8slease.cli.console import configure_console_logging

        configure_console_logging()
    try:
        module = importlib.import_module(COMMANDS[command][0])
        result: int = module.main(rest)
    except ModuleNotFoundError as exc:
        hint = missing_extra_hint(command, exc)
        if hint is None:
            raise
        if "-h" in rest or "--help" in rest:  # help is always there, with what to install
            print(f"usage: k8slease {command} [options]\n\n{COMMANDS[command][1]}\n\n{hint}")
            return 0
        print(hint, file=sys.stderr)
        return 2
    return result
