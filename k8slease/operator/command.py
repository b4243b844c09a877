"""``python -m k8slease operator``: run the ScheduledJobGroup operator.

    python -m k8slease operator [--namespace NS ...| --all-namespaces] [--kubeconfig PATH]
                                [--install-crd] [--print-crd]
                                [--no-auto-create] [--auto-create-group [NS/]GROUP ...]
                                [--auto-create-limit N] [--standalone]
                                [--evaluate-interval S] [--renew-write-interval S]
                                [--liveness URL] [--verbose | --quiet]

Before it starts watching, the operator checks that the API server answers, that the
ScheduledJobGroup CRD is installed and that the namespaces to watch exist; when something is
missing it says what and how to fix it, and exits with status 1 (``--install-crd`` installs or
upgrades the CRD first). A bad option, kubeconfig or environment variable exits with status 2.

The operator runs as **one replica**, without kopf peering (``--standalone``, the only mode, is
accepted for existing command lines; ``--peering`` is gone: it never worked, as no KopfPeering
resource or RBAC for one is shipped). Two operators watching the same namespaces each post every
Event (each Event twice), and both patch the status, each from its own view: a merge patch of
what changed since its own last write, last writer wins field by field. Both fold the same
Leases, so leader, transitions and runs agree; the times each measures on its own clock (failover
gaps, when a Lease expired, when a holder was first seen) may come from either.

Without ``--namespace`` or ``--all-namespaces`` the operator watches the namespace it runs in
(in a pod), else the kubeconfig context's namespace, else ``default``. The same handlers also run
under the kopf CLI: ``kopf run --standalone -m k8slease.operator.handlers`` (settings then come
from ``K8SLEASE_OPERATOR_*`` environment variables).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from k8slease.errors import ConfigError
from k8slease.kube.identity import checked_namespace, default_namespace
from k8slease.logs import get_logger
from k8slease.operator.settings import ENV_PREFIX, OperatorConfig, check_auto_create_group


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="k8slease operator",
        description="Keep ScheduledJobGroup status current from the Leases k8slease writes; "
        "run one replica (docs/operator.md says why).",
        epilog=f"Settings not given as options come from {ENV_PREFIX}* environment variables "
        f"(e.g. {ENV_PREFIX}EVALUATE_INTERVAL=5); see docs/operator.md.",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="namespace to watch (repeatable)"
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster or $KUBECONFIG)")
    crd = parser.add_mutually_exclusive_group()
    crd.add_argument(
        "--install-crd",
        action="store_true",
        help="install (or upgrade) the ScheduledJobGroup CRD before starting; needs the right "
        "to create CustomResourceDefinitions",
    )
    crd.add_argument(
        "--print-crd",
        action="store_true",
        help="print the ScheduledJobGroup CRD as YAML and exit (pipe it to 'kubectl apply -f -')",
    )
    parser.add_argument(
        "--no-auto-create",
        action="store_true",
        help="do not create ScheduledJobGroups for groups that have Leases but no object",
    )
    parser.add_argument(
        "--auto-create-group",
        action="append",
        default=[],
        metavar="[NS/]GROUP",
        help="create a ScheduledJobGroup for this group when it has live Leases but no object, "
        "even if no Lease of it carries the k8slease.io/auto-create=true label (repeatable; "
        "'*' or 'NS/*' for every group)",
    )
    parser.add_argument(
        "--auto-create-limit",
        type=int,
        default=None,
        metavar="N",
        help="at most N auto-created ScheduledJobGroups per namespace (default 20); further "
        "groups are declined with a warning",
    )
    parser.add_argument(
        "--no-read-journals",
        action="store_true",
        help="do not watch the group's Pods for the run records a replica kept when it could "
        "not write them (its container's termination message), nor merge them into the job "
        "Leases (the operator then neither reads Pods nor writes Leases)",
    )
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="accepted for existing command lines: the operator always runs standalone (one "
        "replica, no kopf peering)",
    )
    parser.add_argument(
        "--evaluate-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how often every group is evaluated again, so that an expired Lease or a missed "
        "run shows without any Lease changing (default 5)",
    )
    parser.add_argument(
        "--renew-write-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how often renewal-only changes (lastRenewTime, expiryTime) are written to a "
        "group's status (default 30)",
    )
    parser.add_argument(
        "--liveness",
        metavar="URL",
        help="serve kopf's health endpoint, e.g. http://0.0.0.0:8080/healthz",
    )
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    loudness.add_argument("--quiet", "-q", action="store_true", help="warnings and errors only")
    loudness.add_argument(
        "--log-level",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        default=None,
        help="log level (default INFO; --verbose is DEBUG, --quiet WARNING)",
    )
    return parser


def settings_from_args(argv: Sequence[str]) -> OperatorConfig:
    return _settings(_parser().parse_args(list(argv)))


def _settings(args: argparse.Namespace) -> OperatorConfig:
    for namespace in args.namespace:
        checked_namespace(namespace, source="--namespace")
    base = OperatorConfig.from_env()
    changes: dict[str, object] = {
        "kubeconfig": args.kubeconfig or base.kubeconfig,
        "log_level": "DEBUG"
        if args.verbose
        else "WARNING"
        if args.quiet
        else args.log_level or base.log_level,
        "liveness_endpoint": args.liveness or base.liveness_endpoint,
    }
    if args.no_auto_create:
        changes["auto_create"] = False
    if args.no_read_journals:
        changes["read_journals"] = False
    if args.auto_create_group:
        for entry in args.auto_create_group:
            check_auto_create_group(entry, source="--auto-create-group")
        changes["auto_create_groups"] = base.auto_create_groups + tuple(args.auto_create_group)
    if args.auto_create_limit is not None:
        changes["auto_create_limit"] = args.auto_create_limit
    if args.all_namespaces:
        changes.update(all_namespaces=True, namespaces=())
    elif args.namespace:
        changes.update(namespaces=tuple(args.namespace), all_namespaces=False)
    if args.evaluate_interval is not None:
        changes["evaluate_interval"] = args.evaluate_interval
    if args.renew_write_interval is not None:
        changes["renew_write_interval"] = args.renew_write_interval
    return base.with_changes(**changes)


def configure_logging(level: str) -> None:
    """Key-value logs on stderr (the operator is a program: it configures stdlib logging, which
    k8slease's loggers write to); kopf's own chatter only from WARNING unless debugging."""
    numeric = logging.getLevelName(level.upper())
    numeric = numeric if isinstance(numeric, int) else logging.INFO
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("kopf").setLevel(
        logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
    )
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)


def _preflight(settings: OperatorConfig, *, install: bool) -> None:
    """Fail fast, with the fix in the message, on what kopf would retry forever."""
    from k8slease.kube.apiclient import default_api_client
    from k8slease.operator import preflight

    # one attempt per check: urllib3 would retry a refused connection three times, each
    # with a WARNING, before the one message below says the same
    api_client = default_api_client(kubeconfig=settings.kubeconfig, retries=False)
    try:
        timeout = settings.request_timeout
        if install:
            preflight.install_or_upgrade_crd(api_client, timeout=max(timeout, 30.0))
        preflight.check_crd(api_client, timeout=timeout)
        if not settings.all_namespaces:
            preflight.check_namespaces(api_client, settings.namespaces, timeout=timeout)
    finally:
        api_client.close()  # type: ignore[no-untyped-call]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the operator until interrupted; returns the exit code."""
    from k8slease.operator.preflight import PreflightError

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.print_crd:
        from k8slease.operator.crd import crd_text

        print(crd_text(), end="")
        return 0
    importlib.import_module("kopf")  # the operator extra: missing -> `k8slease` names it
    try:
        settings = _settings(args)
        if not settings.all_namespaces and not settings.namespaces:
            settings = settings.with_changes(
                namespaces=(default_namespace(kubeconfig=settings.kubeconfig or ""),)
            )
        configure_logging(settings.log_level)
        _preflight(settings, install=args.install_crd)
    except ConfigError as exc:
        print(f"k8slease operator: {exc}", file=sys.stderr)
        return 2
    except PreflightError as exc:
        print(f"k8slease operator: {exc}", file=sys.stderr)
        return 1
    if settings.kubeconfig:
        # kopf logs in with the kubernetes client, which reads $KUBECONFIG.
        os.environ["KUBECONFIG"] = settings.kubeconfig

    import kopf

    # the handlers module registers its Pod handler at import when the variable allows it
    os.environ[f"{ENV_PREFIX}READ_JOURNALS"] = "true" if settings.read_journals else "false"
    from k8slease.operator import handlers

    get_logger("k8slease.operator").info(
        "operator.starting",
        namespaces=list(settings.namespaces) or "*",
        auto_create=settings.auto_create,
        auto_create_groups=list(settings.auto_create_groups),
        auto_create_limit=settings.auto_create_limit,
        read_journals=settings.read_journals,
    )
    try:
        kopf.run(
            standalone=True,  # one replica: see the module's docstring
            clusterwide=settings.all_namespaces,
            namespaces=list(settings.namespaces),
            memo=kopf.Memo({handlers.SETTINGS_KEY: settings}),
            liveness_endpoint=settings.liveness_endpoint,
        )
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        print(f"k8slease operator: {exc}", file=sys.stderr)
        return 2
    return 0
