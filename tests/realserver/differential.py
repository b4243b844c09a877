"""Differential testing support: replay one request sequence on two API servers and compare.

A *sequence* is a function of a :class:`Session`; every request it makes through the session is
recorded as a :class:`Response` (status code, ``Warning`` headers, and the body with the values
that legitimately differ between servers masked). Running the same sequence on the embedded
server and on the real kube-apiserver gives two lists of responses; :func:`differences` compares
them pair by pair.

Masked, because they cannot match between two servers: uids, timestamps, resourceVersion
values (their presence is kept), ``managedFields``, the opaque ``continue`` token, and the texts of
error messages (the status code, ``reason``, ``details`` and the causes' ``reason`` and ``field``
are compared; messages are shown next to a difference to explain it, never compared). The
causes of a 422 are compared as a set: kube-apiserver lists a schema's causes in Go map order,
which changes from run to run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

#: metadata fields whose value differs between servers; their presence is still compared.
VOLATILE_METADATA = frozenset(
    {"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "continue", "selfLink"}
)
MASK = "<set>"
#: Kubernetes' human ages: 5s, 3m2s, 4h, 12d, 2y...
AGE = re.compile(r"^(\d+[smhdy])+$")
#: A server-set time in a Table cell (a CRD's "Created At"): when each server made the object,
#: a second apart or more; its rendering is still compared (anything else stays as it is).
CREATED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@dataclass
class Response:
    """One recorded answer, normalised for comparison."""

    label: str
    status: int
    body: Any
    warnings: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{self.label}: HTTP {self.status}"


def _mask_metadata(meta: Mapping[str, Any]) -> JSON:
    out: JSON = {}
    for key, value in meta.items():
        if key == "managedFields":
            continue
        volatile = key in VOLATILE_METADATA or (key == "name" and "generateName" in meta)
        out[key] = MASK if volatile and value not in (None, "") else value
    return out


def normalise(value: Any, messages: list[str] | None = None) -> Any:
    """``value`` with volatile values masked (see the module docstring); messages collected."""
    if isinstance(value, list):
        return [normalise(item, messages) for item in value]
    if not isinstance(value, dict):
        return value
    out: JSON = {}
    is_status = value.get("kind") == "Status"
    is_table = value.get("kind") == "Table"
    for key, item in value.items():
        if key == "metadata" and isinstance(item, dict):
            out[key] = normalise(_mask_metadata(item), messages)
        elif key == "message" and (is_status or "field" in value or "reason" in value):
            if messages is not None and isinstance(item, str):
                messages.append(item)
            out[key] = MASK
        elif is_table and key == "columnDefinitions" and isinstance(item, list):
            out[key] = [{k: v for k, v in column.items() if k != "description"} for column in item]
        elif is_table and key == "rows" and isinstance(item, list):
            out[key] = [
                _normalise_row(row, value.get("columnDefinitions"), messages) for row in item
            ]
        elif key == "causes" and isinstance(item, list):
            # kube-apiserver reports a schema's causes in map order, which varies run to run
            causes = normalise(item, messages)
            out[key] = sorted(causes, key=lambda c: json.dumps(c, sort_keys=True))
        elif key == "uid" and isinstance(item, str) and item:
            out[key] = MASK
        elif key in ("acquireTime", "renewTime", "eventTime", "lastTimestamp", "firstTimestamp"):
            out[key] = item  # set by the sequences themselves: their rendering is compared
        else:
            out[key] = normalise(item, messages)
    return out


def _normalise_row(row: Any, columns: Any, messages: list[str] | None) -> Any:
    if not isinstance(row, dict):
        return row
    out = dict(row)
    cells = row.get("cells")
    if isinstance(cells, list):
        names = [c.get("name") for c in columns] if isinstance(columns, list) else []
        types = [c.get("type") for c in columns] if isinstance(columns, list) else []
        masked = []
        for index, cell in enumerate(cells):
            column = names[index] if index < len(names) else None
            if isinstance(cell, str) and (column == "Age" or AGE.match(cell)):
                masked.append("<age>")
            elif index < len(types) and types[index] == "date" and CREATED.match(str(cell)):
                masked.append("<time>")
            else:
                masked.append(cell)
        out["cells"] = masked
    if "object" in row:
        out["object"] = normalise(row["object"], messages)
    return out


class Session:
    """Requests to one server through a ``kubernetes.client.ApiClient``, each recorded."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.api_client = api_client
        self.ns = namespace
        self.responses: list[Response] = []

    def request(
        self,
        label: str,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        raw_body: bytes | None = None,
    ) -> tuple[int, Any]:
        """Send one request, record it, and return (status, parsed body) unnormalised.

        ``raw_body`` is sent as it is (for malformed JSON); otherwise ``body`` as JSON.
        """
        data = raw_body if raw_body is not None else None
        if data is None and body is not None:
            data = json.dumps(body).encode()
        response = self._send(method, path, query or {}, accept, content_type, data, 30.0)
        parsed = _parse(response.data)
        self._record(label, response, parsed)
        return int(response.status), parsed

    def watch(self, label: str, path: str, query: Mapping[str, str]) -> list[JSON]:
        """A watch read until the server ends it (give ``timeoutSeconds``); records the events.

        A watch the server refuses outright (not a stream) is recorded as that answer.
        """
        response = self._send(
            "GET", path, {"watch": "true", **query}, "application/json", "", None, 60.0
        )
        if response.status != 200:
            parsed = _parse(response.data)
            self._record(label, response, parsed)
            return []
        events = [json.loads(line) for line in _lines(response.data)]
        self._record(label, response, events)
        return events

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        accept: str,
        content_type: str,
        data: bytes | None,
        timeout: float,
    ) -> Any:
        """Through the client's own pool (its TLS and credentials), the body byte for byte."""
        headers = {"Accept": accept}
        if data is not None:
            headers["Content-Type"] = content_type
        method, url, headers, _, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query.items()),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        return self.api_client.rest_client.pool_manager.request(
            method, url, body=data, headers=headers, timeout=timeout, preload_content=True
        )

    def _record(self, label: str, response: Any, parsed: Any) -> None:
        messages: list[str] = []
        warnings = [w.strip() for w in response.headers.getlist("Warning")]
        self.responses.append(
            Response(label, int(response.status), normalise(parsed, messages), warnings, messages)
        )


def _parse(data: bytes) -> Any:
    text = data.decode() if data else ""
    return json.loads(text) if text.strip().startswith(("{", "[")) else text.strip()


def _lines(data: bytes) -> Iterator[str]:
    for line in data.decode().splitlines():
        if line.strip():
            yield line


Sequence = Callable[[Session], None]


def _walk(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in a:
                out.append(f"{where}: only the real server has it: {json.dumps(b[key])[:200]}")
            elif key not in b:
                out.append(f"{where}: only the embedded server has it: {json.dumps(a[key])[:200]}")
            else:
                _walk(a[key], b[key], where, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items embedded, {len(b)} real")
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            _walk(x, y, f"{path}[{index}]", out)
        return
    if a != b:
        out.append(f"{path}: embedded {json.dumps(a)[:200]} != real {json.dumps(b)[:200]}")


def _brief(response: Response) -> str:
    body = response.body if isinstance(response.body, dict) else {}
    reason = body.get("reason", "")
    messages = "; ".join(m[:160] for m in response.messages[:1])
    return f"HTTP {response.status} {reason}".rstrip() + (f" ({messages})" if messages else "")


def differences(embedded: list[Response], real: list[Response]) -> dict[str, list[str]]:
    """Response label -> what differs between the two recordings, for each pair that differs.

    When the status codes differ, that is the whole difference (the bodies then differ anyway).
    """
    if [r.label for r in embedded] != [r.label for r in real]:
        labels = (f"{[r.label for r in embedded]} vs {[r.label for r in real]}",)
        return {"(sequence)": [f"the sequence took another path: {labels[0]}"]}
    out: dict[str, list[str]] = {}
    for a, b in zip(embedded, real, strict=True):
        found: list[str] = []
        if a.status != b.status:
            found.append(f"status: embedded {_brief(a)} != real {_brief(b)}")
        else:
            if a.warnings != b.warnings:
                found.append(f"Warning header: embedded {a.warnings} != real {b.warnings}")
            _walk(a.body, b.body, "", found)
            if found and (a.messages or b.messages):
                found.append(f"(embedded: {_brief(a)}; real: {_brief(b)})")
        if found:
            out[a.label] = found
    return out
