"""``k8slease status [GROUP]``: who leads, what failed over, and did the jobs run, and where.

It reads the Leases directly (they are the truth, and readable without the operator) and adds
the failover history from the group's ScheduledJobGroup status when the operator keeps one.
Read-only: it never writes anything.

A leader whose Lease expired is not shown as the leader. Whether it expired is the operator's
judgment when its status says so (the Lease seen unchanged for its lease duration): the
``renewTime`` was written with the holder's clock, which the operator never compares with its
own. Without the operator, the Lease's ``renewTime`` plus ``leaseDurationSeconds`` is compared
with this machine's clock, and the line says so. The operator's verdict that the holder still
leads is believed only while it can be fresh: a status written before the operator stopped keeps
naming a dead holder, so once the Lease is more than :data:`STALE_STATUS_AFTER` seconds past its
``renewTime`` plus ``leaseDurationSeconds`` on this machine's clock, the holder is not shown as
leader whatever the status says, and the line says that the operator's status disagrees.

An answer other than the Leases (a refused list, an unreachable server) ends the command with one
line saying what was being read, where, and for a refusal what to grant; exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from k8slease.errors import ConfigError, Forbidden, K8sLeaseError, NotFound, TransportError
from k8slease.kube.microtime import parse_microtime, shift
from k8slease.lease.store import list_leases
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
from k8slease.shown import shown

#: Bound on one table cell or name shown (holder identities, job and group names come from
#: Leases other processes write: escaped and cut, see :mod:`k8slease.shown`).
CELL_LIMIT = 96

#: Seconds past its ``renewTime`` plus ``leaseDurationSeconds`` (on this machine's clock) after
#: which a Lease is not shown as leading even though the operator's status names its holder as
#: leader. A running operator judges every group again every ``evaluate_interval`` (5 s by
#: default) and writes an expiry at once, and wall clocks are assumed within about a second of
#: each other (docs/reliability.md, clock assumptions): a status further behind than this was
#: left by an operator that stopped or fell behind (or the clocks differ by more than this).
STALE_STATUS_AFTER = 10.0

#: Seconds each request may take (the Leases' list is the transport's, also 10 s).
REQUEST_TIMEOUT = 10.0


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    rows = [[shown(cell, limit=CELL_LIMIT) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _group_status(api_client: Any, namespace: str, group: str) -> tuple[dict[str, Any], str]:
    """The group's ScheduledJobGroup status ({} without one), and when it could not be read
    for another reason than its absence, why (else "")."""
    import urllib3
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        obj = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, group, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        if exc.status == 404:
            return {}, ""
        problem = f"cannot get {CRD_PLURAL}.{CRD_GROUP} {group}: {exc.status} {exc.reason}"
        if exc.status in (401, 403):
            problem += f" (grant get on {CRD_PLURAL}.{CRD_GROUP} in namespace {namespace})"
        return {}, problem
    except (OSError, ValueError, urllib3.exceptions.HTTPError) as exc:
        return {}, f"cannot get {CRD_PLURAL}.{CRD_GROUP} {group}: {type(exc).__name__}"
    status = obj.get("status") if isinstance(obj, dict) else None
    return (status if isinstance(status, dict) else {}), ""


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def expiry_note(
    holder: str,
    renew: datetime | None,
    duration: int | None,
    status: Mapping[str, Any],
    now: datetime,
) -> str | None:
    """Why ``holder`` is not shown as the leader, or None while its Lease is live."""
    if not holder:
        return None
    who = shown(holder, limit=CELL_LIMIT)
    if status.get("expiredLeader") == holder:
        try:
            expired = parse_microtime(status.get("leaderExpiredTime"))
        except ValueError:
            expired = None
        if expired is not None:
            return (
                f"no leader: the Lease of {who} expired {_ago((now - expired).total_seconds())} "
                "ago (judged by the operator: seen unchanged for its lease duration)"
            )
    if renew is None or not duration:
        return None  # the Lease cannot be judged
    expired = shift(renew, duration)
    late = (now - expired).total_seconds()
    if late <= 0:
        return None
    by_clock = "by its renewTime plus leaseDurationSeconds and this machine's clock"
    if status.get("leader") == holder:
        if late <= STALE_STATUS_AFTER:
            return None  # the operator sees it live: clocks differ a little, or it judges soon
        return (
            f"no leader: the Lease of {who} expired {_ago(late)} ago ({by_clock}); the operator's "
            "status still names it leader: stale (is the operator running?) unless the clocks "
            f"differ by more than {STALE_STATUS_AFTER:g}s"
        )
    return f"no leader: the Lease of {who} expired {_ago(late)} ago ({by_clock})"


def render_status(
    api_client: Any, *, namespace: str, group: str | None = None, now: datetime | None = None
) -> str:
    """The status report of ``group`` (or every group with Leases) in ``namespace``, as text."""
    transport = LeaseTransport(api_client, namespace)
    selector = f"{LABEL_GROUP}={group}" if group else LABEL_GROUP
    try:
        leases, _ = list_leases(transport, label_selector=selector)
    except TransportError as exc:
        raise _unreadable(exc, api_client, namespace) from None
    now = now or datetime.now(UTC)
    groups: dict[str, list[LeaseView]] = {}
    for lease in leases:
        groups.setdefault(str(lease.labels.get(LABEL_GROUP, "?")), []).append(lease)
    if not groups:
        _check_namespace(api_client, namespace)
        return f"no k8slease Leases in namespace {namespace}" + (
            f" for group {shown(group, limit=CELL_LIMIT)}" if group else ""
        )
    sections = []
    for name in sorted(groups):
        sections.append(_render_group(api_client, namespace, name, groups[name], now))
    return "\n\n".join(sections)


def _unreadable(exc: TransportError, api_client: Any, namespace: str) -> TransportError:
    """``exc`` (from listing the Leases) saying what was read, where, and what to grant."""
    server = getattr(getattr(api_client, "configuration", None), "host", None) or "?"
    detail = str(exc).removeprefix("list: ")
    text = f"cannot list leases in namespace {namespace} at {server}: {detail}"
    if isinstance(exc, Forbidden):
        text += (
            f" (grant list on leases.coordination.k8s.io in namespace {namespace}; "
            "get on scheduledjobgroups.k8slease.io adds the operator's failover history)"
        )
    return type(exc)(text, status=exc.status, reason=exc.reason)


def _check_namespace(api_client: Any, namespace: str) -> None:
    """Raise NotFound for a namespace that does not exist (no right to look: no complaint)."""
    import urllib3
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(api_client).read_namespace(namespace, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            raise NotFound(f"namespace {namespace!r} does not exist", status=404) from None
    except (OSError, urllib3.exceptions.HTTPError):
        return  # the list just answered: no verdict on the namespace, nothing to show either


def _render_group(
    api_client: Any, namespace: str, group: str, leases: list[LeaseView], now: datetime
) -> str:
    leader_leases = [lease for lease in leases if lease.labels.get(LABEL_ROLE) == ROLE_LEADER]
    job_leases = [lease for lease in leases if lease.labels.get(LABEL_ROLE) == ROLE_JOB]
    status, unread = _group_status(api_client, namespace, group)
    out = [f"GROUP {shown(group, limit=CELL_LIMIT)} (namespace {namespace})"]
    notes: list[str] = []
    if leader_leases:
        rows = []
        for lease in leader_leases:
            record = lease.record
            note = expiry_note(
                record.holder, record.renew_time, record.duration_seconds, status, now
            )
            if note is not None:
                notes.append(note)
            rows.append(
                [
                    lease.name,
                    "(none)" if note is not None or not record.holder else record.holder,
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
        out.extend(notes)
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
    elif unread:
        out.append("")
        out.append(f"({unread}: Leases shown as read)")
    elif not status:
        out.append("")
        out.append("(no ScheduledJobGroup status: is the operator running? Leases shown as read)")
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        prog="k8slease status",
        description="Show who leads each group, its failovers and its jobs' last runs, read "
        "from the Leases (and from the operator's status when it runs). Read-only.",
    )
    parser.add_argument("group", nargs="?", help="the group to show (default: every group)")
    parser.add_argument(
        "--namespace",
        "-n",
        default=None,
        help=(
            "namespace of the Leases (default: $POD_NAMESPACE, the pod's namespace, the"
            " kubeconfig context's namespace, or default)"
        ),
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from k8slease.kube.apiclient import default_api_client
    from k8slease.kube.identity import checked_namespace, default_namespace

    args = build_parser().parse_args(argv)
    try:
        namespace = (
            checked_namespace(args.namespace, source="--namespace")
            if args.namespace
            else default_namespace(kubeconfig=args.kubeconfig)
        )
        # one attempt per request: urllib3's retries would log a warning for each
        api_client = default_api_client(kubeconfig=args.kubeconfig, retries=False)
        print(render_status(api_client, namespace=namespace, group=args.group))
    except ConfigError as exc:  # a usage or configuration error: 2, as the operator says
        print(f"k8slease status: {exc}", file=sys.stderr)
        return 2
    except K8sLeaseError as exc:
        print(f"k8slease status: {exc}", file=sys.stderr)
        return 1
    return 0
