"""The control plane's throw-away PKI, made with the ``openssl`` command.

One CA signs the serving certificate (``127.0.0.1`` and ``localhost``) and the admin's client
certificate (group ``system:masters``); a separate key signs ServiceAccount tokens. Kubeconfigs
carry the CA, so clients verify the server instead of skipping TLS verification. Keys are
ECDSA P-256 (fast to make, accepted by kube-apiserver, Python's ssl, kubectl and Go).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from k8slease.testing.tools import run_tool

VALID_DAYS = 7
ADMIN_USER = "k8slease-admin"
ADMIN_GROUP = "system:masters"
CA_SUBJECT = "/CN=k8slease-controlplane-ca"
SERVING_NAMES = "subjectAltName=IP:127.0.0.1,DNS:localhost"


class CertificateError(RuntimeError):
    """The ``openssl`` command is missing or failed."""


@dataclass(frozen=True)
class KeyPair:
    """A private key and its certificate, side by side: ``<stem>.key`` and ``<stem>.crt``.

    The ServiceAccount token signing key has no certificate: its public half is
    :attr:`public_key` (``<stem>.pub``).
    """

    key: Path

    @property
    def cert(self) -> Path:
        return self.key.with_suffix(".crt")

    @property
    def public_key(self) -> Path:
        return self.key.with_suffix(".pub")


@dataclass(frozen=True)
class PKI:
    """The key pairs :func:`make_pki` writes in ``directory``: the CA, the API server's serving
    pair, the admin's client pair and the ServiceAccount token signing key."""

    directory: Path
    ca: KeyPair
    server: KeyPair
    admin: KeyPair
    service_account: KeyPair

    @classmethod
    def at(cls, directory: Path) -> PKI:
        """The PKI of ``directory``: each key pair named by its stem."""
        ca, server, admin, service_account = (
            KeyPair(directory / f"{stem}.key")
            for stem in ("ca", "server", "admin", "service-account")
        )
        return cls(directory, ca, server, admin, service_account)


def _openssl(*args: str | Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificateError("the 'openssl' command is needed to make the control plane's PKI")
    run_tool(
        [openssl, *map(str, args)], timeout=60, failure=CertificateError, what=f"openssl {args[0]}"
    )


def _new_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    path.chmod(0o600)


def _issue(pki: PKI, pair: KeyPair, subject: str, extensions: list[str]) -> None:
    """A new key for ``pair`` and its certificate, signed by the CA with the given X.509v3
    extensions (the CA's serial file, ``ca.srl``, is written beside its certificate)."""
    _new_key(pair.key)
    csr = pair.key.with_suffix(".csr")
    ext = pair.key.with_suffix(".ext")
    ext.write_text("\n".join(extensions) + "\n")
    _openssl("req", "-new", "-key", pair.key, "-subj", subject, "-out", csr)
    _openssl("x509", "-req", "-in", csr, "-CA", pki.ca.cert, "-CAkey", pki.ca.key,
             "-CAcreateserial", "-days", str(VALID_DAYS), "-sha256", "-extfile", ext,
             "-out", pair.cert)  # fmt: skip
    csr.unlink()
    ext.unlink()


def client_certificate(pki: PKI, stem: str, *, user: str, group: str | None = None) -> KeyPair:
    """A client key pair ``<stem>.key`` / ``<stem>.crt`` for ``user`` in ``group``, signed by the
    CA (for the node's components: the kubelet, kube-proxy, ...)."""
    pair = KeyPair(pki.directory / f"{stem}.key")
    subject = (f"/O={group}" if group else "") + f"/CN={user}"
    _issue(pki, pair, subject, [*_LEAF, "extendedKeyUsage=clientAuth"])
    return pair


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
    pki = PKI.at(directory)
    _new_key(pki.ca.key)
    _openssl("req", "-x509", "-new", "-key", pki.ca.key, "-subj", CA_SUBJECT,
             "-days", str(VALID_DAYS), "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash", "-out", pki.ca.cert)  # fmt: skip
    names = "subjectAltName=" + ",".join(serving_names) if serving_names else SERVING_NAMES
    _issue(pki, pki.server, "/CN=kube-apiserver", [*_LEAF, "extendedKeyUsage=serverAuth", names])
    _issue(pki, pki.admin, f"/O={ADMIN_GROUP}/CN={ADMIN_USER}",
           [*_LEAF, "extendedKeyUsage=clientAuth"])  # fmt: skip
    _new_key(pki.service_account.key)
    _openssl("pkey", "-in", pki.service_account.key, "-pubout",
             "-out", pki.service_account.public_key)  # fmt: skip
    return pki
