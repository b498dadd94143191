"""The webhook's TLS without hand work: a CA and a serving certificate kept in a Secret.

kube-apiserver calls the webhook over HTTPS and trusts only the `caBundle` of the
MutatingWebhookConfiguration. `WebhookCerts.ensure()` reads the Secret (issuing a new CA and
certificate when it is missing, unreadable, for other names, or close to expiry), writes the
caBundle, and writes `tls.crt`/`tls.key` into `cert_dir` for the HTTPS listener.
`rotate_if_due()`, called periodically, does the same again and calls `reload(cert, key)` when
the served certificate changed (because it was due, or another replica rotated it).

Several replicas may start at once: each write carries the version it replaces, and the one
that loses re-reads the winner's certificate. A new CA's bundle keeps the previous CA, so
replicas still serving the old certificate stay trusted while they catch up.
"""

import datetime
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import BaseModel, ConfigDict, Field, model_validator

from vgpu.app.x509_parts import certificate_builder, key_pem, key_usage
from vgpu.ports.webhook_tls import StoredCerts, WebhookTLSPort

log = logging.getLogger(__name__)

CA_CERT, CA_KEY, CA_BUNDLE, TLS_CERT, TLS_KEY = (
    "ca.crt",
    "ca.key",
    "ca-bundle.crt",
    "tls.crt",
    "tls.key",
)
_ATTEMPTS = 5


class WebhookCertsConfig(BaseModel):
    """`webhook_tls:` in the scheduler's settings (the chart renders it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret_namespace: str = Field(min_length=1)
    secret_name: str = Field("vgpu-scheduler-tls", min_length=1)
    webhook_name: str = Field("vgpu-webhook", min_length=1)
    service_name: str = Field("vgpu-scheduler", min_length=1)
    cert_dir: Path = Path("/tls")
    validity_days: int = Field(365, ge=2, le=3650)
    rotate_before_days: int = Field(30, ge=1)

    @model_validator(mode="after")
    def _rotation_before_expiry(self) -> "WebhookCertsConfig":
        if self.rotate_before_days >= self.validity_days:
            raise ValueError(
                f"rotate_before_days ({self.rotate_before_days}) must be less than "
                f"validity_days ({self.validity_days})"
            )
        return self

    def dns_names(self) -> list[str]:
        base = f"{self.service_name}.{self.secret_namespace}.svc"
        return [base, f"{base}.cluster.local"]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class WebhookCerts:
    def __init__(
        self,
        config: WebhookCertsConfig,
        store: WebhookTLSPort,
        reload: Callable[[Path, Path], None],
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._config = config
        self._store = store
        self._reload = reload
        self._now = now
        self._served: Mapping[str, bytes] | None = None

    @property
    def paths(self) -> tuple[Path, Path]:
        return self._config.cert_dir / TLS_CERT, self._config.cert_dir / TLS_KEY

    def ensure(self) -> tuple[Path, Path]:
        """Make sure a current certificate is stored, trusted and on disk; its two paths."""
        self._serve(self._current())
        return self.paths

    def rotate_if_due(self) -> bool:
        """Rotate when due, pick up another replica's rotation; True if `reload` was called."""
        current = self._current()
        if self._served is not None and dict(current.data) == dict(self._served):
            return False
        self._serve(current)
        self._reload(*self.paths)
        return True

    def run(self, stop: threading.Event, interval_s: float = 3600.0) -> None:
        """Call `rotate_if_due()` every `interval_s` until `stop` is set; run it on its own
        thread. A failure (API unreachable) is logged and retried at the next interval: the
        served certificate stays valid for `rotate_before_days` more days."""
        while not stop.wait(interval_s):
            try:
                self.rotate_if_due()
            except Exception:
                log.exception("webhook certificate check failed; retrying in %.0f s", interval_s)

    def _current(self) -> StoredCerts:
        for _ in range(_ATTEMPTS):
            stored = self._store.load()
            why = self._unusable(stored)
            if stored is not None and why is None:
                return stored
            log.info("issuing a new webhook certificate: %s", why)
            if self._store.save(self._issue(stored), replaces=stored):
                continue  # read back what was stored, with its version
            log.info("another replica stored a certificate first; reading it")
        raise RuntimeError(
            f"could not store a webhook certificate in Secret {self._config.secret_namespace}/"
            f"{self._config.secret_name} after {_ATTEMPTS} attempts (concurrent writers)"
        )

    def _unusable(self, stored: StoredCerts | None) -> str | None:
        """Why the stored certificates cannot be served on, or None when they can."""
        if stored is None:
            return "none stored yet"
        missing = {CA_CERT, CA_KEY, CA_BUNDLE, TLS_CERT, TLS_KEY} - set(stored.data)
        if missing:
            return f"the Secret lacks {sorted(missing)}"
        try:
            cert = x509.load_pem_x509_certificate(stored.data[TLS_CERT])
            ca = x509.load_pem_x509_certificate(stored.data[CA_CERT])
            cert.verify_directly_issued_by(ca)
            names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except (ValueError, TypeError, x509.ExtensionNotFound) as exc:
            return f"the stored certificate is unreadable ({exc})"
        wanted = set(self._config.dns_names())
        if not wanted <= set(names.value.get_values_for_type(x509.DNSName)):
            return f"the stored certificate is not for {sorted(wanted)}"
        due = self._now() + datetime.timedelta(days=self._config.rotate_before_days)
        if min(cert.not_valid_after_utc, ca.not_valid_after_utc) <= due:
            return f"the stored certificate expires at {cert.not_valid_after_utc:%Y-%m-%d %H:%M}"
        return None

    def _issue(self, previous: StoredCerts | None) -> dict[str, bytes]:
        now = self._now()
        until = now + datetime.timedelta(days=self._config.validity_days)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        # a name of its own per CA: a bundle holding the previous CA too stays unambiguous
        ca_name = x509.Name(
            [
                x509.NameAttribute(
                    NameOID.COMMON_NAME, f"{self._config.service_name}-ca@{int(now.timestamp())}"
                )
            ]
        )
        ca = (
            certificate_builder(ca_name, ca_name, ca_key.public_key(), now, until)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .add_extension(key_usage(cert_sign=True), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        [dns, *_] = self._config.dns_names()
        cert = (
            certificate_builder(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns)]),
                ca_name,
                key.public_key(),
                now,
                until,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .add_extension(key_usage(cert_sign=False), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in self._config.dns_names()]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        return {
            CA_CERT: ca_pem,
            CA_KEY: key_pem(ca_key),
            CA_BUNDLE: ca_pem + _previous_ca(previous, now),
            TLS_CERT: cert.public_bytes(serialization.Encoding.PEM),
            TLS_KEY: key_pem(key),
        }

    def _serve(self, current: StoredCerts) -> None:
        self._store.trust(current.data[CA_BUNDLE])
        cert_path, key_path = self.paths
        cert_path.parent.mkdir(parents=True, exist_ok=True)
        key_path.touch(mode=0o600, exist_ok=True)
        key_path.write_bytes(current.data[TLS_KEY])
        cert_path.write_bytes(current.data[TLS_CERT])
        self._served = dict(current.data)


def _previous_ca(previous: StoredCerts | None, now: datetime.datetime) -> bytes:
    """The CA being replaced, while it is still valid: certificates it signed stay trusted."""
    if previous is None or CA_CERT not in previous.data:
        return b""
    try:
        ca = x509.load_pem_x509_certificate(previous.data[CA_CERT])
    except ValueError:
        return b""
    return previous.data[CA_CERT] if ca.not_valid_after_utc > now else b""
