"""Who may talk to the embedded API server: loopback callers holding its kubeconfig's token.

The server listens on 127.0.0.1, but a loopback address alone does not keep a web page out: a
page open in the developer's browser can send a "simple" cross-origin request (a ``text/plain``
POST needs no CORS preflight) to ``http://127.0.0.1:<port>``, and with DNS rebinding
(``evil.example`` resolving to 127.0.0.1) even read the answers. Three checks close that:

- the ``Host`` header must name a loopback host (``localhost``, ``127.x.y.z``, ``::1``): a
  rebinding page sends its own name there, and cannot change it;
- an ``Origin`` header, which browsers add to cross-origin and to every POST request, must be a
  loopback origin too;
- the bearer token written into the server's own kubeconfig must come with each request (a
  browser cannot add an ``Authorization`` header to a simple request, and cannot read the file).

The control endpoints (``/_k8slease/...``, which pause the server and inject faults) also take
no body but JSON: a form or ``text/plain`` body is what a page can send without a preflight.
``/healthz``, ``/livez``, ``/readyz`` and ``/version`` answer without a token, as a real
kube-apiserver answers them anonymously (its ``system:public-info-viewer`` role).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import urlsplit

from .statusbody import StatusError

#: Paths a real kube-apiserver serves to anonymous callers.
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})

#: Media types a browser may send cross-origin without a CORS preflight.
_SIMPLE_MEDIA_TYPES = frozenset(
    {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}
)


def new_token() -> str:
    """A fresh random bearer token (256 bits), one per server."""
    return secrets.token_urlsafe(32)


def _host_name(authority: str) -> str:
    """The host part of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``)."""
    authority = authority.strip()
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    if authority.count(":") > 1:  # a bare IPv6 address
        return authority
    return authority.rpartition(":")[0] if ":" in authority else authority


def is_loopback_host(name: str) -> bool:
    """True for ``localhost`` (and its subdomains), ``127.0.0.0/8`` and ``::1``."""
    name = name.strip().rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _forbidden(message: str) -> StatusError:
    return StatusError(403, "Forbidden", message, {})


def check_host(host_header: str | None) -> None:
    """Refuse (403) a request whose ``Host`` is not a loopback name or address."""
    if host_header is None or not is_loopback_host(_host_name(host_header)):
        raise _forbidden(
            f"host {host_header!r} is not a loopback name or address: the embedded API server "
            "answers only requests addressed to localhost, 127.0.0.1 or ::1"
        )


def check_origin(origin: str | None) -> None:
    """Refuse (403) a cross-origin request from a non-loopback page (``Origin`` header)."""
    if origin is None:
        return
    host = urlsplit(origin.strip()).hostname if origin.strip() != "null" else None
    if host is None or not is_loopback_host(host):
        raise _forbidden(
            f"cross-origin request from {origin!r} refused: the embedded API server answers "
            "browsers only from loopback origins"
        )


def check_token(authorization: str | None, token: str) -> None:
    """Refuse (401, as kube-apiserver does) a request without ``Bearer <token>``."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise StatusError(401, "Unauthorized", "Unauthorized", None)


def check_control_body(method: str, content_type: str | None) -> None:
    """Refuse (415) a control request whose body is not declared JSON.

    A body-less write (``POST /_k8slease/pause``) may carry no ``Content-Type`` at all; a
    ``text/plain`` or form one is what a cross-origin page sends, so it is refused even empty.
    """
    if method in ("GET", "HEAD", "OPTIONS"):
        return
    media = (content_type or "").split(";")[0].strip().lower()
    if media in _SIMPLE_MEDIA_TYPES or (media and media != "application/json"):
        raise StatusError(
            415,
            "UnsupportedMediaType",
            f"the control endpoints take JSON bodies only (Content-Type: application/json), "
            f"not {media!r}",
        )
