"""Raw JSON requests through a ``kubernetes.client.ApiClient`` (its TLS and credentials), with
the status code, the parsed body and the ``Warning`` headers of every answer; and the REST path
of any object, from discovery. Used against the real API server (tests/realserver) and by the
chart's objects applied to either server (tests/chart)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    warnings: tuple[str, ...]


class Rest:
    """Requests to one server as one identity."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self._resources: dict[str, dict[str, dict[str, Any]]] = {}

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Answer:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        method, url, headers, _, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.rest_client.pool_manager.request(
            method, url, body=data, headers=headers, timeout=30.0, preload_content=True
        )
        text = response.data.decode() if response.data else ""
        parsed = json.loads(text) if text.strip().startswith(("{", "[")) else text
        return Answer(int(response.status), parsed, tuple(response.headers.getlist("Warning")))

    def resources(self, api_version: str) -> dict[str, dict[str, Any]]:
        """kind -> APIResource of ``api_version``, from discovery (cached; see :meth:`forget`)."""
        if api_version not in self._resources:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            answer = self.request("GET", path)
            found = answer.body.get("resources", []) if answer.status == 200 else []
            self._resources[api_version] = {r["kind"]: r for r in found if "/" not in r["name"]}
        return self._resources[api_version]

    def forget(self, api_version: str) -> None:
        self._resources.pop(api_version, None)

    def path(self, obj: Mapping[str, Any], *, name: bool = False) -> str:
        """The collection (or, with ``name``, the object) path of ``obj``."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        resource = self.resources(api_version)[kind]
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if resource["namespaced"]:
            prefix += f"/namespaces/{obj['metadata']['namespace']}"
        path = f"{prefix}/{resource['name']}"
        return f"{path}/{obj['metadata']['name']}" if name else path

    def served(self, obj: Mapping[str, Any]) -> bool:
        """Whether the server serves ``obj``'s kind (from discovery)."""
        return obj["kind"] in self.resources(obj["apiVersion"])

    def create(self, obj: Mapping[str, Any], **query: str) -> Answer:
        return self.request("POST", self.path(obj), body=obj, query=query)
