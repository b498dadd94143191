"""Self-managed webhook TLS on the API emulator: the Secret, the caBundle patch, rotation, and
a real TLS handshake that trusts only the caBundle kube-apiserver would use."""

import base64
import datetime
import socket
import ssl
import threading
from pathlib import Path

from cryptography import x509

from tests.e2e.k8s_emulator import RunningApiServer
from vgpu.adapters.kubernetes.connection import ConnectionSettings, new_api_client
from vgpu.adapters.kubernetes.webhook_tls import KubernetesWebhookTLS
from vgpu.app.scheduler.certs import WebhookCerts, WebhookCertsConfig

NAMESPACE = "vgpu-system"
SECRET = f"/api/v1/namespaces/{NAMESPACE}/secrets/vgpu-scheduler-tls"
WEBHOOK = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vgpu-webhook"


def webhook_configuration() -> dict[str, object]:
    service = {"name": "vgpu-scheduler", "namespace": NAMESPACE, "path": "/webhook", "port": 443}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "vgpu-webhook"},
        "webhooks": [{"name": "vgpu.hami.io", "clientConfig": {"service": service},
                      "sideEffects": "None", "admissionReviewVersions": ["v1"]}],
    }


class Clock:
    """Starts 61 days ago, so that after the tests' jump a new certificate is valid now (the
    TLS handshake checks validity against the real time)."""

    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=61)

    def __call__(self) -> datetime.datetime:
        return self.now


def replica(api: RunningApiServer, cert_dir: Path, clock: Clock,
            reloads: list[tuple[Path, Path]]) -> WebhookCerts:
    config = WebhookCertsConfig(secret_namespace=NAMESPACE, cert_dir=cert_dir,
                                validity_days=90, rotate_before_days=30)
    store = KubernetesWebhookTLS(
        new_api_client(ConnectionSettings(host=api.url)), namespace=NAMESPACE,
        secret_name=config.secret_name, webhook_name=config.webhook_name,
    )
    return WebhookCerts(config, store, lambda c, k: reloads.append((c, k)), now=clock)


def ca_bundle(api: RunningApiServer) -> bytes:
    config = api.get(WEBHOOK)
    assert config is not None
    return base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"])


def handshake(cert: Path, key: Path, trusted: bytes) -> str:
    """Serve one TLS handshake with cert/key; connect as kube-apiserver does (the service's
    DNS name, only the caBundle trusted). Returns the server certificate's subject."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cadata=trusted.decode())
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with server_context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", port)) as raw, client_context.wrap_socket(
            raw, server_hostname=f"vgpu-scheduler.{NAMESPACE}.svc"
        ) as tls:
            subject = dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]
            tls.send(b"x")
    finally:
        thread.join(5)
        listener.close()
    return str(subject)


def test_bootstrap_stores_the_secret_patches_the_ca_bundle_and_serves_a_trusted_cert(
    k8s_api: RunningApiServer, tmp_path: Path
) -> None:
    k8s_api.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                   webhook_configuration())
    cert, key = replica(k8s_api, tmp_path / "a", Clock(), []).ensure()
    secret = k8s_api.get(SECRET)
    assert secret is not None
    assert set(secret["data"]) == {"ca.crt", "ca.key", "ca-bundle.crt", "tls.crt", "tls.key"}
    assert base64.b64decode(secret["data"]["tls.crt"]) == cert.read_bytes()
    assert handshake(cert, key, ca_bundle(k8s_api)) == f"vgpu-scheduler.{NAMESPACE}.svc"
    config = k8s_api.get(WEBHOOK)
    assert config is not None
    assert config["webhooks"][0]["clientConfig"]["service"]["path"] == "/webhook"  # kept


def test_rotation_on_the_emulator_keeps_every_replica_trusted(
    k8s_api: RunningApiServer, tmp_path: Path
) -> None:
    k8s_api.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                   webhook_configuration())
    clock, reloads_a, reloads_b = Clock(), [], []
    a = replica(k8s_api, tmp_path / "a", clock, reloads_a)
    b = replica(k8s_api, tmp_path / "b", clock, reloads_b)
    cert_a, key_a = a.ensure()
    b.ensure()
    old_cert = cert_a.read_bytes()
    old_key = key_a.read_bytes()
    assert k8s_api.requests("POST", "/api/v1/namespaces/vgpu-system/secrets") != []
    clock.now += datetime.timedelta(days=61)
    assert a.rotate_if_due() is True
    assert reloads_a == [(cert_a, key_a)]
    new_cert = x509.load_pem_x509_certificate(cert_a.read_bytes())
    assert new_cert.not_valid_after_utc > clock.now + datetime.timedelta(days=80)
    # b has not rotated yet: the old certificate is still trusted by the new bundle
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "tls.crt").write_bytes(old_cert)
    (stale / "tls.key").write_bytes(old_key)
    assert handshake(stale / "tls.crt", stale / "tls.key", ca_bundle(k8s_api))
    assert b.rotate_if_due() is True
    cert_b, key_b = tmp_path / "b" / "tls.crt", tmp_path / "b" / "tls.key"
    assert cert_b.read_bytes() == cert_a.read_bytes()
    assert handshake(cert_b, key_b, ca_bundle(k8s_api))
    assert len(k8s_api.requests("PUT", SECRET)) == 1  # b re-read a's rotation, did not redo it
