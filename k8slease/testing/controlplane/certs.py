"""The control plane's throw-away PKI, made with the ``openssl`` command.

One CA signs the serving certificate (``127.0.0.1`` and ``localhost``) and the admin's client
certificate (group ``system:masters``); a separate key signs ServiceAccount tokens. Kubeconfigs
carry the CA, so clients verify the server instead of skipping TLS verification. Keys are
ECDSA P-256 (fast to make, accepted by kube-apiserver, Python's ssl, kubectl and Go).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from k8slease.testing.filenames import InDirectory

VALID_DAYS = 7
ADMIN_USER = "k8slease-admin"
ADMIN_GROUP = "system:masters"
CA_SUBJECT = "/CN=k8slease-controlplane-ca"
SERVING_NAMES = "subjectAltName=IP:127.0.0.1,DNS:localhost"


class CertificateError(RuntimeError):
    """The ``openssl`` command is missing or failed."""


@dataclass(frozen=True)
class PKI:
    """Paths of the files :func:`make_pki` wrote."""

    directory: Path

    ca_cert = InDirectory("ca.crt")
    ca_key = InDirectory("ca.key")
    server_cert = InDirectory("server.crt")
    server_key = InDirectory("server.key")
    admin_cert = InDirectory("admin.crt")
    admin_key = InDirectory("admin.key")
    service_account_key = InDirectory("service-account.key")
    service_account_public_key = InDirectory("service-account.pub")


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificateError("the 'openssl' command is needed to make the control plane's PKI")
    result = subprocess.run(
        [openssl, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )
    if result.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed: {result.stderr.strip()}")


def _new_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", path.name, cwd=path.parent)  # fmt: skip
    path.chmod(0o600)


def _sign(pki: PKI, key: Path, cert: Path, subject: str, extensions: list[str]) -> None:
    """A certificate for ``key`` signed by the CA, with the given X.509v3 extensions."""
    directory = pki.directory
    csr = cert.with_suffix(".csr")
    ext = cert.with_suffix(".ext")
    ext.write_text("\n".join(extensions) + "\n")
    _openssl("req", "-new", "-key", key.name, "-subj", subject, "-out", csr.name, cwd=directory)
    _openssl("x509", "-req", "-in", csr.name, "-CA", pki.ca_cert.name, "-CAkey", pki.ca_key.name,
             "-CAcreateserial", "-days", str(VALID_DAYS), "-sha256", "-extfile", ext.name,
             "-out", cert.name, cwd=directory)  # fmt: skip
    csr.unlink()
    ext.unlink()


def client_certificate(pki: PKI, stem: str, *, user: str, group: str | None = None) -> Path:
    """A client certificate ``<stem>.crt`` (key ``<stem>.key``) for ``user`` in ``group``,
    signed by the CA (for the node's components: the kubelet, kube-proxy, ...)."""
    key = pki.directory / f"{stem}.key"
    cert = pki.directory / f"{stem}.crt"
    _new_key(key)
    subject = (f"/O={group}" if group else "") + f"/CN={user}"
    _sign(pki, key, cert, subject, [*_LEAF, "extendedKeyUsage=clientAuth"])
    return cert


_LEAF = [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    "subjectKeyIdentifier=hash",
    "authorityKeyIdentifier=keyid,issuer",
]


def make_pki(directory: Path, *, serving_names: Sequence[str] = ()) -> PKI:
    """Write a CA, a serving certificate, an admin client certificate and a signing key.

    ``serving_names`` (``"IP:..."``, ``"DNS:..."``) replace the serving certificate's default
    names (127.0.0.1 and localhost): the cluster's API server is also reached as a Service.
    """
    directory.mkdir(parents=True, exist_ok=True)
    pki = PKI(directory)
    _new_key(pki.ca_key)
    _openssl("req", "-x509", "-new", "-key", pki.ca_key.name, "-subj", CA_SUBJECT,
             "-days", str(VALID_DAYS), "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash",
             "-out", pki.ca_cert.name, cwd=directory)  # fmt: skip
    leaf = _LEAF
    names = "subjectAltName=" + ",".join(serving_names) if serving_names else SERVING_NAMES
    _new_key(pki.server_key)
    _sign(pki, pki.server_key, pki.server_cert, "/CN=kube-apiserver",
          [*leaf, "extendedKeyUsage=serverAuth", names])  # fmt: skip
    _new_key(pki.admin_key)
    _sign(pki, pki.admin_key, pki.admin_cert, f"/O={ADMIN_GROUP}/CN={ADMIN_USER}",
          [*leaf, "extendedKeyUsage=clientAuth"])  # fmt: skip
    _new_key(pki.service_account_key)
    _openssl("pkey", "-in", pki.service_account_key.name, "-pubout",
             "-out", pki.service_account_public_key.name, cwd=directory)  # fmt: skip
    return pki
