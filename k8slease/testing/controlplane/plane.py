"""``ControlPlane``: etcd and kube-apiserver as local processes, the surface of ``APIServer``."""

from __future__ import annotations

import hashlib
import http.client
import json
import ssl
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..launch import Launched
from .build import Progress, ensure_binaries, stderr_progress
from .cache import Binaries
from .certs import make_pki
from .gotool import tail
from .kubeconfig import kubeconfig_document, write_document
from .processes import Child, free_port

if TYPE_CHECKING:
    import kubernetes.client

HOST = "127.0.0.1"
#: The ServiceAccount token issuer (and default audience) the server signs tokens for.
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: Only an allocation range for Service IPs: nothing routes to it, nothing listens there.
SERVICE_CIDR = "10.0.0.0/24"
#: Every request once, when its response is complete, with its metadata (not bodies).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata"}],
}


class ControlPlaneError(RuntimeError):
    """The control plane did not come up (the message has the failing process's log tail)."""


class ControlPlane(Launched):
    """A real ``kube-apiserver`` over a real ``etcd``, on 127.0.0.1, for tests and demos.

    Same surface as the embedded :class:`~k8slease.testing.APIServer`::

        with ControlPlane() as plane:
            api = kubernetes.client.CoordinationV1Api(plane.api_client())

    It serves HTTPS with a throw-away CA (kubeconfigs carry it: clients verify the server),
    authorizes with RBAC, and signs ServiceAccount tokens (the TokenRequest API works). The
    admin identity (``.kubeconfig``, ``.api_client()``) is a client certificate in
    ``system:masters``; :meth:`kubeconfig_for_token` and ``api_client(token=...)`` act as
    anyone else. There is no controller-manager and no scheduler: deleted namespaces stay
    ``Terminating``, no pods run, nothing is garbage-collected, no token Secrets appear.

    ``audit=True`` writes an audit log (JSON lines, level Metadata: user, verb, objectRef
    with the object's name, response code) to :attr:`audit_log`, for counting requests per
    object; ``/metrics`` (:meth:`metrics`) counts per resource and verb only.

    The binaries are built on first use (minutes, once per machine; see
    :func:`~.build.ensure_binaries`); ``binaries`` overrides where they come from.
    """

    embedded = False
    name = "the control plane"
    error = ControlPlaneError

    def __init__(
        self,
        port: int = 0,
        *,
        kubeconfig: str | Path | None = None,
        binaries: Binaries | None = None,
        start_timeout: float = 90.0,
        progress: Progress = stderr_progress,
        audit: bool = False,
    ) -> None:
        super().__init__(kubeconfig=kubeconfig, start_timeout=start_timeout, progress=progress)
        self.host = HOST
        self.port = port
        self._binaries = binaries
        self._audit = audit

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>`` (valid once started)."""
        return f"https://{self.host}:{self.port}"

    @property
    def audit_log(self) -> Path:
        """The audit log (JSON lines; exists once the first request is logged); needs
        ``audit=True``."""
        if not self._audit:
            raise RuntimeError("the audit log is off: create the ControlPlane with audit=True")
        return self.directory / "audit.log"

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed the serving certificate."""
        return self._require_pki().ca.cert

    def start(self) -> ControlPlane:
        """Start etcd and kube-apiserver; returns once ``/readyz`` answers ok.

        Raises :class:`~.gotool.BuildError` when the binaries cannot be built and
        :class:`ControlPlaneError` (with the log tail) when a process fails or is not ready
        within ``start_timeout``; nothing is left running or on disk then.
        """
        if self._children:
            return self
        binaries = self._binaries or ensure_binaries(self._progress)
        self._directory = Path(tempfile.mkdtemp(prefix="k8slease-controlplane-"))
        try:
            self._pki = make_pki(self._directory / "pki")
            began = time.monotonic()
            self._launch(binaries)
            self._wait_ready(began)
            self.start_seconds = time.monotonic() - began
            self._kubeconfig = write_document(
                self._admin_document(), self._admin_kubeconfig_target()
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, binaries: Binaries) -> None:
        directory, pki = self.directory, self._require_pki()
        client_port, peer_port = free_port(), free_port()
        if not self.port:
            self.port = free_port()
        etcd_url = f"http://{HOST}:{client_port}"
        peer_url = f"http://{HOST}:{peer_port}"
        etcd = Child("etcd", [
            str(binaries.etcd),
            "--name=k8slease",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=k8slease={peer_url}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ], directory / "etcd.log")  # fmt: skip
        apiserver = Child("kube-apiserver", [
            str(binaries.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={HOST}",
            f"--advertise-address={HOST}",
            f"--secure-port={self.port}",
            f"--cert-dir={directory / 'certs'}",
            f"--tls-cert-file={pki.server.cert}",
            f"--tls-private-key-file={pki.server.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account.public_key}",
            f"--service-account-signing-key-file={pki.service_account.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        ], directory / "kube-apiserver.log")  # fmt: skip
        if self._audit:
            apiserver.argv += self._audit_args(directory)
        self._children = [etcd, apiserver]
        for child in self._children:
            child.start()

    @staticmethod
    def _audit_args(directory: Path) -> list[str]:
        policy = directory / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={directory / 'audit.log'}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ]

    def _wait_ready(self, began: float) -> None:
        def timed_out() -> str:
            log = self._children[-1].log
            return (
                f"kube-apiserver was not ready within {self.start_timeout:.0f} s; last "
                f"lines of {log}:\n{tail(log)}"
            )

        self._wait_until(
            self._readyz, deadline=began + self.start_timeout, poll=0.1, timed_out=timed_out
        )

    def _readyz(self) -> bool:
        try:
            status, _ = self.get("/readyz", timeout=2.0)
        except OSError:
            return False
        return status == 200

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd (SIGTERM, then SIGKILL); remove their data."""
        self._stop_children()
        self._remove_files()

    # --- clients -----------------------------------------------------------------------------

    def _admin_document(self) -> dict[str, object]:
        pki = self._require_pki()
        return kubeconfig_document(self.url, pki.ca.cert, client=pki.admin)

    def kubeconfig_for_token(self, token: str, path: str | Path | None = None) -> Path:
        """A kubeconfig that authenticates with a bearer ``token`` (say, from TokenRequest).

        Written to ``path``, or into the control plane's directory (removed by :meth:`stop`).
        """
        if not token:
            raise ValueError("token must be a non-empty string")
        target = Path(path) if path is not None else None
        if target is None:
            digest = hashlib.sha256(token.encode()).hexdigest()[:16]
            target = self.directory / "kubeconfigs" / f"token-{digest}.kubeconfig"
        document = kubeconfig_document(self.url, self._require_pki().ca.cert, token=token)
        return write_document(document, target)

    def configuration(self, token: str | None = None) -> kubernetes.client.Configuration:
        """A ``kubernetes.client.Configuration``: the admin, or the bearer ``token``'s identity."""
        import kubernetes.client

        pki = self._require_pki()
        config = kubernetes.client.Configuration()
        config.host = self.url
        config.ssl_ca_cert = str(pki.ca.cert)
        if token is None:
            config.cert_file = str(pki.admin.cert)
            config.key_file = str(pki.admin.key)
        else:
            config.api_key = {"authorization": f"Bearer {token}"}
        return config

    def api_client(self, token: str | None = None) -> kubernetes.client.ApiClient:
        """A new ``kubernetes.client.ApiClient`` (close it when done): the admin, or ``token``."""
        import kubernetes.client

        return kubernetes.client.ApiClient(self.configuration(token))

    def ssl_context(self, token_only: bool = False) -> ssl.SSLContext:
        """An SSL context that trusts the CA (and presents the admin certificate unless
        ``token_only``), for raw HTTP clients."""
        pki = self._require_pki()
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        if not token_only:
            context.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        return context

    def get(self, path: str, *, timeout: float = 10.0) -> tuple[int, str]:
        """``GET path`` as the admin; returns (status, body text). For ``/readyz``, ``/metrics``."""
        connection = http.client.HTTPSConnection(
            self.host, self.port, context=self.ssl_context(), timeout=timeout
        )
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def metrics(self) -> str:
        """The server's Prometheus ``/metrics`` text (parse it with :mod:`.metrics`)."""
        status, body = self.get("/metrics")
        if status != 200:
            raise ControlPlaneError(f"GET /metrics answered {status}: {body[:200]}")
        return body
