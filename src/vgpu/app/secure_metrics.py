"""The `secure_metrics` settings of the scheduler and the monitor, and what they build: the
HTTPS context of the metrics listener and the guard that authorises each scrape
(`vgpu.app.metrics_guard`).

The certificate is `tls.crt` and `tls.key` in `cert_dir` when both are there (a Secret mounted
there, from cert-manager say); otherwise a self-signed one is made at start and written there
(a fresh temporary directory when `cert_dir` is not set), as controller-runtime does. A scraper
then skips verification (Prometheus: `tlsConfig.insecureSkipVerify`) or trusts the mounted CA.
"""

import datetime
import logging
import socket
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import BaseModel, ConfigDict

from vgpu.app.metrics_guard import MetricsGuard
from vgpu.app.x509_parts import certificate_builder, key_pem, key_usage

log = logging.getLogger(__name__)

CERT_FILE, KEY_FILE = "tls.crt", "tls.key"
SELF_SIGNED_DAYS = 365


class SecureMetrics(BaseModel):
    """`/metrics` over HTTPS, answered only to a bearer token of an identity allowed to `get`
    the non-resource URL `/metrics` (TokenReview, then SubjectAccessReview)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    cert_dir: Path | None = None


class SecureMetricsError(ValueError):
    """Secure metrics cannot be served as set; the message names the setting or file."""


def metrics_tls(settings: SecureMetrics) -> ssl.SSLContext | None:
    """The metrics listener's server context; None when secure metrics are off."""
    if not settings.enabled:
        return None
    folder = settings.cert_dir or Path(tempfile.mkdtemp(prefix="vgpu-metrics-tls-"))
    cert, key = folder / CERT_FILE, folder / KEY_FILE
    if not (cert.exists() and key.exists()):
        _write_self_signed(cert, key)
        log.info("metrics served over HTTPS with a self-signed certificate (%s)", cert)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise SecureMetricsError(f"secure metrics: cannot use {cert} / {key}: {exc}") from None
    return context


def metrics_guard(
    settings: SecureMetrics, kubeconfig: Path | None, fake_cluster: Path | None
) -> MetricsGuard | None:
    """The guard asking the API server about each scrape's token; None when secure metrics are
    off. A fake cluster has no API server to ask: SecureMetricsError."""
    if not settings.enabled:
        return None
    if fake_cluster is not None:
        raise SecureMetricsError(
            "secure metrics ask the API server who may read /metrics (TokenReview, "
            "SubjectAccessReview); with --fake-cluster there is none: turn them off"
        )
    from vgpu.adapters.kubernetes import ConnectionSettings, new_api_client
    from vgpu.adapters.kubernetes.access_review import KubernetesAccessReview

    path = str(kubeconfig) if kubeconfig is not None else None
    return MetricsGuard(KubernetesAccessReview(new_api_client(ConnectionSettings(kubeconfig=path))))


def _write_self_signed(cert_path: Path, key_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)
    host = socket.gethostname()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-metrics")])
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        certificate_builder(
            name, name, key.public_key(), now, now + datetime.timedelta(days=SELF_SIGNED_DAYS)
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(key_usage(cert_sign=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(host), x509.DNSName("localhost")]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    try:
        cert_path.parent.mkdir(parents=True, exist_ok=True)
        key_path.touch(mode=0o600, exist_ok=True)
        key_path.write_bytes(key_pem(key))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    except OSError as exc:
        raise SecureMetricsError(
            f"secure metrics: cannot write a self-signed certificate to {cert_path.parent} "
            f"({exc.strerror or exc}); set secure_metrics cert_dir to a writable directory or "
            f"put {CERT_FILE} and {KEY_FILE} there"
        ) from None
