"""``k8slease status [GROUP]``: who leads, what failed over, and did the jobs run, and where.

It reads the Leases directly (they are the truth, and readable without the operator) and adds
the failover history from the group's ScheduledJobGroup status when the operator keeps one.
Read-only: it never writes anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from k8slease.errors import K8sLeaseError
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.names import (
    CRD_GROUP,
    CRD_PLURAL,
    CRD_VERSION,
    LABEL_GROUP,
    LABEL_JOB,
    LABEL_ROLE,
    ROLE_JOB,
    ROLE_LEADER,
)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _group_status(api_client: Any, namespace: str, group: str) -> dict[str, Any]:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        obj = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, group
        )
    except (ApiException, OSError, ValueError):
        return {}
    status = obj.get("status") if isinstance(obj, dict) else None
    return status if isinstance(status, dict) else {}


def render_status(api_client: Any, *, namespace: str, group: str | None = None) -> str:
    """The status report of ``group`` (or every group with Leases) in ``namespace``, as text."""
    transport = LeaseTransport(api_client, namespace)
    selector = f"{LABEL_GROUP}={group}" if group else LABEL_GROUP
    leases, _ = transport.list(label_selector=selector)
    groups: dict[str, list[LeaseView]] = {}
    for lease in map(LeaseView.decode, leases):
        groups.setdefault(str(lease.labels.get(LABEL_GROUP, "?")), []).append(lease)
    if not groups:
        return f"no k8slease Leases in namespace {namespace}" + (
            f" for group {group}" if group else ""
        )
    sections = []
    for name in sorted(groups):
        sections.append(_render_group(api_client, namespace, name, groups[name]))
    return "\n\n".join(sections)


def _render_group(api_client: Any, namespace: str, group: str, leases: list[LeaseView]) -> str:
    leader_leases = [lease for lease in leases if lease.labels.get(LABEL_ROLE) == ROLE_LEADER]
    job_leases = [lease for lease in leases if lease.labels.get(LABEL_ROLE) == ROLE_JOB]
    status = _group_status(api_client, namespace, group)
    out = [f"GROUP {group} (namespace {namespace})"]
    if leader_leases:
        rows = []
        for lease in leader_leases:
            record = lease.record
            rows.append(
                [
                    lease.name,
                    record.holder or "(none)",
                    _when(record.acquire_time),
                    _when(record.renew_time),
                    str(record.transitions),
                    str(record.fencing_token),
                    str(status.get("lastFailoverTime", "-")),
                ]
            )
        out.append(
            _table(
                ["LEASE", "LEADER", "SINCE", "LAST RENEW", "TRANSITIONS", "TOKEN", "LAST FAILOVER"],
                rows,
            )
        )
    if job_leases:
        rows = []
        for lease in sorted(job_leases, key=lambda item: item.name):
            state = lease.job
            run = state.last_run
            rows.append(
                [
                    str(lease.labels.get(LABEL_JOB, lease.name)),
                    _when(run.tick) if run else "-",
                    run.holder if run else "-",
                    run.outcome if run else "-",
                    _when(run.started) if run else "-",
                    f"{(run.finished - run.started).total_seconds():.1f}s" if run else "-",
                    f"{state.count('succeeded')}/{state.count('failed')}/{state.count('lost')}",
                ]
            )
        out.append("")
        out.append(
            _table(
                ["JOB", "LAST TICK", "RAN ON", "OUTCOME", "STARTED", "TOOK", "OK/FAILED/LOST"], rows
            )
        )
    failovers = status.get("failovers")
    if isinstance(failovers, list) and failovers:
        rows = [
            [
                str(item.get("time", "-")),
                str(item.get("from") or "-"),
                str(item.get("to") or "-"),
                str(item.get("reason", "-")),
                f"{item['gapSeconds']:.3f}s"
                if isinstance(item.get("gapSeconds"), int | float)
                else "-",
            ]
            for item in failovers
            if isinstance(item, Mapping)
        ]
        out.append("")
        out.append("failover history (from the operator):")
        out.append(_table(["WHEN", "FROM", "TO", "REASON", "GAP"], rows))
    elif not status:
        out.append("")
        out.append("(no ScheduledJobGroup status: is the operator running? Leases shown as read)")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    from k8slease.kube.apiclient import default_api_client
    from k8slease.kube.identity import default_namespace

    parser = argparse.ArgumentParser(prog="k8slease status", description=__doc__.splitlines()[0])
    parser.add_argument("group", nargs="?", help="the group (default: every group)")
    parser.add_argument("--namespace", "-n", default=None)
    parser.add_argument("--kubeconfig", default=None)
    args = parser.parse_args(argv)
    try:
        api_client = default_api_client(kubeconfig=args.kubeconfig)
        print(
            render_status(
                api_client, namespace=args.namespace or default_namespace(), group=args.group
            )
        )
    except K8sLeaseError as exc:
        print(f"k8slease status: {exc}")
        return 1
    return 0
