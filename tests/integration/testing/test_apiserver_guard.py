"""The embedded server answers only loopback callers holding its kubeconfig's token (issue 27).

A web page open in the developer's browser could otherwise drive it: a cross-origin
``text/plain`` POST needs no CORS preflight, and DNS rebinding puts a foreign name in ``Host``.
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client, config

from k8slease.testing import APIServer


def send(
    server: APIServer,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, Any]]:
    """One raw HTTP request (headers exactly as given, as a browser or an attacker sends them)."""
    context = server.ssl_context()
    connection = (
        http.client.HTTPSConnection(server.host, server.port, timeout=5, context=context)
        if context is not None
        else http.client.HTTPConnection(server.host, server.port, timeout=5)
    )
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for key, value in (headers or {}).items():
            connection.putheader(key, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw.startswith(b"{") else {"text": raw}
    finally:
        connection.close()


def local(server: APIServer, **extra: str) -> dict[str, str]:
    return {"Host": f"127.0.0.1:{server.port}", **server.headers(), **extra}


def test_a_browser_style_cross_origin_pause_is_refused(
    k8s_embedded_apiserver: APIServer,
) -> None:
    """The request the issue measured (200, server paused) is refused three times over."""
    server = k8s_embedded_apiserver
    page = {"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "text/plain"}
    code, body = send(server, "POST", "/_k8slease/pause", headers=page, body=b"x")
    assert (code, body["reason"]) == (403, "Forbidden")
    assert "evil.example" in body["message"]
    # with the right Host (no rebinding) the Origin alone refuses it
    page["Host"] = f"127.0.0.1:{server.port}"
    code, body = send(server, "POST", "/_k8slease/pause", headers=page, body=b"x")
    assert (code, body["reason"]) == (403, "Forbidden")
    assert "cross-origin" in body["message"]
    # from no foreign origin, but a text/plain body (what a page sends without a preflight)
    code, body = send(
        server, "POST", "/_k8slease/pause", headers=local(server, **{"Content-Type": "text/plain"})
    )
    assert (code, body["reason"]) == (415, "UnsupportedMediaType")
    # and without the token
    del page["Origin"], page["Content-Type"]
    code, body = send(server, "POST", "/_k8slease/pause", headers=page)
    assert (code, body["reason"]) == (401, "Unauthorized")
    assert not server.faults.paused
    code, _ = send(server, "POST", "/_k8slease/pause", headers=local(server))
    assert code == 200 and server.faults.paused, "the token holder still may"


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:80", "10.0.0.1", "127.0.0.1.evil.example", ""]
)
def test_a_foreign_host_is_refused_everywhere(k8s_embedded_apiserver: APIServer, host: str) -> None:
    server = k8s_embedded_apiserver
    for path in ("/healthz", "/api/v1/namespaces", "/_k8slease/stats"):
        code, body = send(server, "GET", path, headers={**server.headers(), "Host": host})
        assert (code, body.get("reason")) == (403, "Forbidden"), path


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:1", "127.0.0.1", "127.1.2.3:9", "[::1]:5"]
)
def test_loopback_hosts_are_answered(k8s_embedded_apiserver: APIServer, host: str) -> None:
    server = k8s_embedded_apiserver
    code, body = send(
        server, "GET", "/api/v1/namespaces", headers={**server.headers(), "Host": host}
    )
    assert code == 200 and body["kind"] == "NamespaceList"


def test_a_loopback_origin_is_answered(k8s_embedded_apiserver: APIServer) -> None:
    server = k8s_embedded_apiserver
    headers = local(server, Origin=f"http://localhost:{server.port}")
    assert send(server, "GET", "/_k8slease/stats", headers=headers)[0] == 200


@pytest.mark.parametrize("token", [None, "Bearer junk", "Bearer ", "Basic YTpi"])
def test_without_the_kubeconfig_token_it_is_401(
    k8s_embedded_apiserver: APIServer, token: str | None
) -> None:
    server = k8s_embedded_apiserver
    headers = {"Host": f"127.0.0.1:{server.port}"}
    if token is not None:
        headers["Authorization"] = token
    for path in ("/api/v1/namespaces", "/apis/coordination.k8s.io/v1/leases", "/_k8slease/stats"):
        code, body = send(server, "GET", path, headers=headers)
        assert (code, body["reason"], body["kind"]) == (401, "Unauthorized", "Status"), path
    # what kube-apiserver serves anonymously stays open (probes, version checks)
    assert send(server, "GET", "/healthz", headers=headers)[0] == 200
    assert send(server, "GET", "/version", headers=headers)[0] == 200


def test_a_client_built_from_the_kubeconfig_is_let_in(k8s_embedded_apiserver: APIServer) -> None:
    server = k8s_embedded_apiserver
    document = json.loads(server.kubeconfig.read_text())
    assert document["users"][0]["user"]["token"] == server.token
    assert server.kubeconfig.stat().st_mode & 0o077 == 0, "the token is for its owner only"
    api_client = config.new_client_from_config(config_file=str(server.kubeconfig))
    with api_client:
        names = [n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items]
    assert "default" in names
    other = APIServer()
    assert other.token != server.token, "each server has its own token"


def test_kubectl_sends_the_token_over_tls(k8s_embedded_apiserver: APIServer) -> None:
    """kubectl and client-go read a kubeconfig's token only for https servers: served over TLS
    with its CA in the kubeconfig, the server lets them in unmodified."""
    server = k8s_embedded_apiserver
    assert server.url.startswith("https://127.0.0.1:")
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(server.kubeconfig), "get", "namespaces", "-o", "name"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "namespace/default" in done.stdout.split()


def test_auth_off_takes_any_token_but_keeps_the_host_check() -> None:
    with APIServer(auth=False) as server:
        headers = {"Host": f"localhost:{server.port}"}
        assert send(server, "GET", "/api/v1/namespaces", headers=headers)[0] == 200
        code, _ = send(server, "GET", "/api/v1/namespaces", headers={"Host": "evil.example"})
        assert code == 403


def test_the_cli_has_a_flag_to_turn_auth_off() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "k8slease", "apiserver", "--help"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "--no-auth" in result.stdout
