"""Server-side TLS for the listeners: the webhook's reloadable context, the extender's mutual TLS.

The contexts are built here, not by uvicorn from file names, so that the webhook certificate can
be replaced while serving: `WebhookTls.reload` loads the new pair into the same context, and
every handshake after that presents it (connections already open keep the old one).
"""

import ssl
import threading
from pathlib import Path


class TlsError(ValueError):
    """A certificate, key or CA file that cannot be used; the message names the files."""


class WebhookTls:
    """The webhook listener's server context, with a certificate that can be swapped in place."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = _server_context()
        self._reloading = threading.Lock()
        self.reload(cert, key)

    def reload(self, cert: Path, key: Path) -> None:
        """Serve `cert`/`key` from the next handshake on. The pair is tried on a scratch context
        first, so a bad pair raises TlsError and leaves the one in use untouched."""
        _load_pair(_server_context(), cert, key)
        with self._reloading:
            _load_pair(self.context, cert, key)


def mutual_tls_context(cert: Path, key: Path, client_ca: Path) -> ssl.SSLContext:
    """A server context that requires a client certificate signed by `client_ca`."""
    context = _server_context()
    _load_pair(context, cert, key)
    try:
        context.load_verify_locations(cafile=client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"cannot use client CA {client_ca}: {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _server_context() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _load_pair(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"cannot use TLS certificate {cert} / key {key}: {exc}") from None
