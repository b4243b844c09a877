"""A realistic app with the three job classes, as you would run it with 3 replicas.

* ``nightly_invoices``: ONCE_PER_TICK. Every replica fires; one wins the job's Lease and writes
  invoices, idempotently and fenced (see ``invoice_store.py`` next to this file).
* ``refresh_local_cache``: EVERY_REPLICA. Each replica refreshes its own in-memory cache; a lock
  here would leave the other replicas with stale data.
* ``poll_queue``: LEADER singleton. Runs only on the group's leader and stops as soon as
  leadership is lost.

Run it (the demo, the chart's example Deployment and the e2e tests do)::

    python -m k8slease.cli.demoapp.billing_app --kubeconfig /path/to/kubeconfig --fast

``--fast`` shortens every period (ticks every few seconds, a 3-second leader Lease) so that a
failover can be watched in a minute. Without it the invoices run at 02:00 UTC.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from kubernetes import client

from k8slease.cli.demoapp.invoice_store import InvoiceStore
from k8slease.election.timing import ElectionTiming
from k8slease.errors import K8sLeaseError
from k8slease.jobs.context import JobContext
from k8slease.jobs.registry import Jobs
from k8slease.jobs.spec import Mode
from k8slease.kube.apiclient import default_api_client
from k8slease.kube.health import HealthServer

CUSTOMERS = ("acme", "globex", "initech")


def build_jobs(
    *,
    group: str = "billing",
    namespace: str | None = None,
    api_client: client.ApiClient | None = None,
    store: InvoiceStore | None = None,
    fast: bool = False,
    identity: str | None = None,
) -> Jobs:
    """The app's jobs; ``fast`` shortens every period for demos and tests."""
    timing = ElectionTiming(lease_duration=3.0, renew_interval=1.0, renew_deadline=2.0)
    jobs = Jobs(
        group,
        namespace=namespace,
        api_client=api_client,
        identity=identity,
        election=timing if fast else None,
    )
    cache: dict[str, int] = {}

    def nightly_invoices(ctx: JobContext) -> None:
        assert ctx.tick is not None and ctx.fencing_token is not None
        period = ctx.tick.strftime("%Y-%m-%dT%H:%M:%S")
        for number, customer in enumerate(CUSTOMERS, start=1):
            if store is not None:
                store.upsert(
                    customer, period, 1000 * number, token=ctx.fencing_token, by=ctx.identity
                )
        if store is not None:
            store.record_run(ctx.tick.isoformat(), ctx.identity, ctx.fencing_token)
        ctx.log.info("invoices.written", period=period, fencing_token=ctx.fencing_token)

    def refresh_local_cache(ctx: JobContext) -> None:
        cache["refreshed"] = cache.get("refreshed", 0) + 1
        ctx.log.debug("cache.refreshed", times=cache["refreshed"])

    def poll_queue(ctx: JobContext) -> None:
        ctx.log.info("queue.polling", fencing_token=ctx.fencing_token)
        polls = 0
        while not ctx.lost.wait(1.0 if fast else 5.0):
            polls += 1
            ctx.log.debug("queue.polled", polls=polls)
        ctx.log.info("queue.stopped", polls=polls)

    if fast:
        jobs.interval(
            seconds=4, mode=Mode.ONCE_PER_TICK, lock_at_most_for=30, lock_at_least_for=1, grace=30
        )(nightly_invoices)
        jobs.interval(seconds=2, mode=Mode.EVERY_REPLICA)(refresh_local_cache)
    else:
        jobs.cron("0 2 * * *", mode=Mode.ONCE_PER_TICK, lock_at_most_for=900, lock_at_least_for=60)(
            nightly_invoices
        )
        jobs.interval(seconds=30, mode=Mode.EVERY_REPLICA)(refresh_local_cache)
    jobs.singleton(mode=Mode.LEADER)(poll_queue)
    return jobs


class JSONLines(logging.Formatter):
    """One JSON object per line: k8slease's records carry their event and fields."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "k8slease_event", None)
        if event is None:
            return json.dumps({"event": record.getMessage(), "logger": record.name})
        data = {
            "event": event,
            **getattr(record, "k8slease_fields", {}),
            "level": record.levelname.lower(),
            "logger": record.name,
            "timestamp": self.formatTime(record),
        }
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure_logging(level: str) -> None:
    """JSON lines on stdout: one event per line, easy to grep and to parse in tests.

    k8slease logs through stdlib logging (the ``k8slease`` logger; the jobs' ``ctx.log`` too), so
    the app sets the level and the output the usual way.
    """
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JSONLines())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    numeric = getattr(logging, level.upper())
    logging.getLogger("k8slease").setLevel(numeric)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: in-cluster, else ~/.kube)")
    parser.add_argument("--group", default=os.environ.get("K8SLEASE_GROUP", "billing"))
    parser.add_argument("--namespace", default=None)
    parser.add_argument(
        "--store",
        default=os.environ.get("INVOICE_STORE"),
        help="SQLite file for invoices (shared by the replicas in the demo)",
    )
    parser.add_argument("--fast", action="store_true", help="short periods for demos and tests")
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "info"))
    parser.add_argument(
        "--health-port",
        type=int,
        default=os.environ.get("HEALTH_PORT", "0"),
        help="serve /healthz (Jobs.healthy) and /readyz (Jobs.ready) on this port for probes",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.health_port <= 65535:
        parser.error(f"--health-port / HEALTH_PORT: {args.health_port} is not a port number")
    if args.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        parser.error(f"--log-level / LOG_LEVEL: {args.log_level!r} is not a log level")
    configure_logging(args.log_level)
    try:
        api_client = default_api_client(kubeconfig=args.kubeconfig) if args.kubeconfig else None
        store = InvoiceStore(args.store) if args.store else None
        jobs = build_jobs(
            group=args.group,
            namespace=args.namespace,
            api_client=api_client,
            store=store,
            fast=args.fast,
        )
    except K8sLeaseError as exc:
        print(f"billing_app: {exc}", file=sys.stderr)
        return 2
    health = (
        HealthServer(jobs.healthy, ready=jobs.ready, port=args.health_port).start()
        if args.health_port
        else None
    )
    try:
        jobs.run(handle_signals=True)
    finally:
        if health is not None:
            health.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
