"""Throughput and watch capacity of the embedded API server.

The server runs in its own process (``python -m k8slease apiserver``), as the demo and other
benchmarks use it, and the load comes from an aiohttp client in this process, so client and
server do not share a GIL. Figures:

- ``get_rps``/``patch_rps``/``list_rps``: small requests per second at 32 in flight;
- ``watches_open``: watches the server reports open at once (target: 100);
- ``watch_fanout_events_per_s``: events delivered per second across all those watches;
- ``watch_delivery_p99_ms``: write-to-delivery latency, 99th percentile, across watches.

Run: ``.venv/bin/python -m benchmarks.bench_apiserver``; it writes the figures with their
provenance (``benchmarks.provenance``) to ``benchmarks/results/apiserver.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import provenance

CONCURRENCY = 32
REQUESTS = 4000
WATCHES = 100
WRITES = 50
NS = "default"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


def start_server(directory: Path) -> tuple[subprocess.Popen[str], str]:
    """Start ``k8slease apiserver`` in a subprocess; returns it and its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "k8slease", "apiserver", "--kubeconfig", str(directory / "kc")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    url = process.stdout.readline().split()[1]
    return process, url


async def _rate(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> float:
    """Requests per second for REQUESTS requests at CONCURRENCY in flight."""
    remaining = REQUESTS
    headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
    data = json.dumps(body) if body is not None else None

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            async with session.request(method, url, data=data, headers=headers) as response:
                await response.read()
                assert response.status < 300, response.status

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return REQUESTS / (time.perf_counter() - started)


async def _watches(session: aiohttp.ClientSession, base: str) -> dict[str, float]:
    """Open WATCHES watches, make WRITES writes, measure delivery to every watch."""
    async with session.get(f"{base}{LEASES}/bench") as response:
        rv = (await response.json())["metadata"]["resourceVersion"]
    delivered: list[float] = []
    sent: dict[str, float] = {}
    done = asyncio.Event()
    ready = 0
    all_ready = asyncio.Event()

    async def watch() -> None:
        nonlocal ready
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "60"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with session.get(f"{base}{LEASES}", params=params, timeout=timeout) as response:
            ready += 1
            if ready == WATCHES:
                all_ready.set()
            seen = 0
            async for line in response.content:
                event = json.loads(line)
                holder = event["object"]["spec"]["holderIdentity"]
                delivered.append(time.perf_counter() - sent[holder])
                seen += 1
                if seen == WRITES:
                    break
        if len(delivered) == WATCHES * WRITES:
            done.set()

    tasks = [asyncio.create_task(watch()) for _ in range(WATCHES)]
    await asyncio.wait_for(all_ready.wait(), 30)
    async with session.get(f"{base}/_k8slease/stats") as response:
        open_watches = (await response.json())["watches"]
    started = time.perf_counter()
    for i in range(WRITES):
        holder = f"h{i}"
        sent[holder] = time.perf_counter()
        patch = json.dumps({"spec": {"holderIdentity": holder}})
        headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(f"{base}{LEASES}/bench", data=patch, headers=headers) as response:
            assert response.status == 200
    await asyncio.wait_for(done.wait(), 60)
    elapsed = time.perf_counter() - started
    await asyncio.gather(*tasks)
    delivered.sort()
    return {
        "watches_open": float(open_watches),
        "watch_fanout_events_per_s": len(delivered) / elapsed,
        "watch_delivery_p50_ms": delivered[len(delivered) // 2] * 1000,
        "watch_delivery_p99_ms": delivered[int(len(delivered) * 0.99)] * 1000,
    }


def kubeconfig_access(kubeconfig: Path) -> tuple[str, ssl.SSLContext | None]:
    """The bearer token the server wrote into its kubeconfig (every request must carry it) and
    an SSL context trusting its CA (None for a plain-http server)."""
    document = json.loads(kubeconfig.read_text())
    cluster = document["clusters"][0]["cluster"]
    ca = cluster.get("certificate-authority-data")
    context = ssl.create_default_context(cadata=base64.b64decode(ca).decode()) if ca else None
    return str(document["users"][0]["user"]["token"]), context


async def _run(base: str, access: tuple[str, ssl.SSLContext | None]) -> dict[str, float]:
    token, context = access
    connector = aiohttp.TCPConnector(limit=WATCHES + CONCURRENCY + 8, ssl=context or False)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        lease = {"metadata": {"name": "bench"}, "spec": {"holderIdentity": "x"}}
        async with session.post(f"{base}{LEASES}", json=lease) as response:
            assert response.status == 201, await response.text()
        figures = {
            "get_rps": await _rate(session, "GET", f"{base}{LEASES}/bench"),
            "patch_rps": await _rate(
                session, "PATCH", f"{base}{LEASES}/bench", {"spec": {"leaseDurationSeconds": 9}}
            ),
            "list_rps": await _rate(session, "GET", f"{base}{LEASES}"),
        }
        figures.update(await _watches(session, base))
        async with session.get(f"{base}/_k8slease/stats") as response:
            figures["requests_counted"] = float((await response.json())["total"])
        return figures


def run() -> dict[str, float]:
    """Run the benchmark against a fresh server process; returns the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp))
        try:
            return asyncio.run(_run(url, kubeconfig_access(Path(tmp) / "kc")))
        finally:
            process.terminate()
            process.wait(timeout=10)


def record(out: Path = provenance.RESULTS) -> tuple[Path, dict[str, float]]:
    """Run the benchmark and write its figures with their provenance; the file and figures."""
    started = provenance.start(
        "apiserver",
        "python -m benchmarks.bench_apiserver",
        concurrency=CONCURRENCY,
        requests=REQUESTS,
        watches=WATCHES,
        writes=WRITES,
    )
    figures = run()
    return provenance.write(out / "apiserver.json", started, figures), figures


def main(argv: list[str] | None = None) -> None:
    """Run, record and print the figures as a table. It takes no option, but answers ``--help``
    and refuses any other argument, rather than running (and rewriting the published results)
    whatever it is given."""
    argparse.ArgumentParser(
        prog="python -m benchmarks.bench_apiserver",
        description="Throughput and watch capacity of the embedded API server; writes "
        "benchmarks/results/apiserver.json (the published figures).",
    ).parse_args(argv)
    path, figures = record()
    width = max(len(k) for k in figures)
    print(f"{'figure':<{width}}  value")
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:,.1f}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
