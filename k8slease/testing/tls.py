"""TLS for the embedded API server: one throw-away CA and serving certificate per process.

Why TLS on a loopback test server: client-go and kubectl (``clientcmd``) read a kubeconfig
user's credentials only for ``https`` servers, so over plain ``http`` they would send no bearer
token, and the server answers 401 to requests without the token it wrote into its kubeconfig
(see :mod:`.guard`). Served over TLS, with the CA in the kubeconfig, every client that reads the
kubeconfig (kubectl, client-go, kopf, the official Python client) sends the token unmodified.

The PKI is made once per process with the ``openssl`` command (as the real control plane's is,
:mod:`.controlplane.certs`) in a temporary directory removed at exit. Without ``openssl`` there
is none and the server falls back to plain ``http`` (then only clients that send a token over
``http``, such as the Python client and kopf, get in; or run it with ``auth=False``).
"""

from __future__ import annotations

import atexit
import shutil
import ssl
import tempfile
import threading
from pathlib import Path

from .controlplane.certs import PKI, CertificateError, make_pki

_lock = threading.Lock()
_made: list[PKI | None] = []


def process_pki() -> PKI | None:
    """The process's CA and serving certificate (made on first use), or None without openssl."""
    with _lock:
        if not _made:
            directory = Path(tempfile.mkdtemp(prefix="k8slease-tls-"))
            atexit.register(shutil.rmtree, directory, True)
            try:
                _made.append(make_pki(directory))
            except CertificateError:
                _made.append(None)
        return _made[0]


def server_context(pki: PKI) -> ssl.SSLContext:
    """The server side: the serving certificate (127.0.0.1 and localhost), TLS 1.2 or newer."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(pki.server.cert, pki.server.key)
    return context


def client_context(pki: PKI) -> ssl.SSLContext:
    """A client context that trusts the process's CA (for raw HTTP clients in tests)."""
    return ssl.create_default_context(cafile=str(pki.ca.cert))
