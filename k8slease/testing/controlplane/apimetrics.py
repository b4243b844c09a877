"""Reading kube-apiserver's Prometheus ``/metrics`` text (``apiserver_request_total`` etc.)."""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of metric ``name`` as (labels, value), in the order they appear."""
    found: list[tuple[dict[str, str], float]] = []
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = _SAMPLE.match(line)
        if match is None or match["name"] != name:
            continue
        labels = {m["key"]: m["value"] for m in _LABEL.finditer(match["labels"] or "")}
        found.append((labels, float(match["value"])))
    return found


def total(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include all of ``labels``.

    ``total(text, "apiserver_request_total", resource="leases", verb="UPDATE")`` counts lease
    updates (all namespaces, codes and scopes).
    """
    return sum(
        value
        for found, value in samples(text, name)
        if all(found.get(key) == want for key, want in labels.items())
    )
