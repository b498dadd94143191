"""Self-managed webhook TLS: issue, store, trust, serve, rotate; several replicas at once."""

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from pydantic import ValidationError

from vgpu.adapters.fake.webhook_tls import FakeWebhookTLS
from vgpu.app.scheduler.certs import WebhookCerts, WebhookCertsConfig
from vgpu.ports.webhook_tls import StoredCerts

START = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime.datetime:
        return self.now


def certs_for(tmp_path: Path, store: FakeWebhookTLS, clock: Clock, name: str = "a",
              reloads: list[tuple[Path, Path]] | None = None) -> WebhookCerts:
    config = WebhookCertsConfig(
        secret_namespace="vgpu-system", cert_dir=tmp_path / name, validity_days=90,
        rotate_before_days=30,
    )
    sink = reloads if reloads is not None else []
    return WebhookCerts(config, store, lambda c, k: sink.append((c, k)), now=clock)


def pem_certs(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def test_first_start_issues_a_certificate_the_trusted_ca_signed_for_the_service(
    tmp_path: Path,
) -> None:
    store = FakeWebhookTLS()
    cert_path, key_path = certs_for(tmp_path, store, Clock()).ensure()
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert store.ca_bundle is not None
    [ca] = pem_certs(store.ca_bundle)
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "vgpu-scheduler.vgpu-system.svc", "vgpu-scheduler.vgpu-system.svc.cluster.local"
    ]
    assert cert.not_valid_after_utc == START + datetime.timedelta(days=90)
    assert key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert key_path.stat().st_mode & 0o077 == 0
    assert store.stored is not None and store.stored.data["tls.crt"] == cert_path.read_bytes()


def test_a_second_replica_serves_the_stored_certificate_instead_of_issuing_one(
    tmp_path: Path,
) -> None:
    store, clock = FakeWebhookTLS(), Clock()
    first, _ = certs_for(tmp_path, store, clock, "a").ensure()
    second, _ = certs_for(tmp_path, store, clock, "b").ensure()
    assert store.saves == 1
    assert first.read_bytes() == second.read_bytes()


def test_nothing_happens_before_the_rotation_is_due(tmp_path: Path) -> None:
    store, clock, reloads = FakeWebhookTLS(), Clock(), []
    certs = certs_for(tmp_path, store, clock, reloads=reloads)
    certs.ensure()
    clock.now += datetime.timedelta(days=59)
    assert certs.rotate_if_due() is False
    assert (store.saves, reloads) == (1, [])


def test_rotation_reissues_reloads_and_keeps_the_old_ca_trusted(tmp_path: Path) -> None:
    store, clock, reloads = FakeWebhookTLS(), Clock(), []
    certs = certs_for(tmp_path, store, clock, reloads=reloads)
    cert_path, key_path = certs.ensure()
    old = x509.load_pem_x509_certificate(cert_path.read_bytes())
    clock.now += datetime.timedelta(days=61)
    assert certs.rotate_if_due() is True
    assert reloads == [(cert_path, key_path)]
    new = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert new.serial_number != old.serial_number
    assert store.ca_bundle is not None
    new_ca, old_ca = pem_certs(store.ca_bundle)
    new.verify_directly_issued_by(new_ca)
    old.verify_directly_issued_by(old_ca)  # replicas not yet reloaded stay trusted


def test_a_replica_picks_up_the_certificate_another_replica_rotated(tmp_path: Path) -> None:
    store, clock, reloads = FakeWebhookTLS(), Clock(), []
    leader = certs_for(tmp_path, store, clock, "a")
    follower = certs_for(tmp_path, store, clock, "b", reloads=reloads)
    leader.ensure()
    follower.ensure()
    clock.now += datetime.timedelta(days=61)
    leader.rotate_if_due()
    assert follower.rotate_if_due() is True
    assert store.saves == 2
    assert (tmp_path / "a" / "tls.crt").read_bytes() == (tmp_path / "b" / "tls.crt").read_bytes()
    assert len(reloads) == 1


def test_a_replica_that_loses_the_race_serves_the_winners_certificate(tmp_path: Path) -> None:
    store, clock = FakeWebhookTLS(), Clock()
    certs_for(tmp_path, store, clock, "winner").ensure()
    winner = store.stored
    loads = iter([None])  # the loser read "nothing stored" just before the winner wrote
    original_load = store.load
    store.load = lambda: next(loads, None) or original_load()  # type: ignore[method-assign]
    cert_path, _ = certs_for(tmp_path, store, clock, "loser").ensure()
    assert store.stored is winner
    assert winner is not None and cert_path.read_bytes() == winner.data["tls.crt"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("tls.key"),
        lambda d: d.update({"tls.crt": b"not a certificate"}),
    ],
    ids=["missing key", "garbage certificate"],
)
def test_a_damaged_secret_is_replaced(tmp_path: Path, damage: object) -> None:
    store, clock = FakeWebhookTLS(), Clock()
    certs_for(tmp_path, store, clock, "a").ensure()
    assert store.stored is not None
    data = dict(store.stored.data)
    damage(data)  # type: ignore[operator]
    store.stored = StoredCerts(data, store.stored.version)
    cert_path, _ = certs_for(tmp_path, store, clock, "b").ensure()
    assert store.saves == 2
    x509.load_pem_x509_certificate(cert_path.read_bytes())


def test_a_certificate_for_another_service_name_is_replaced(tmp_path: Path) -> None:
    store, clock = FakeWebhookTLS(), Clock()
    certs_for(tmp_path, store, clock).ensure()
    renamed = WebhookCertsConfig(secret_namespace="vgpu-system", service_name="other",
                                 cert_dir=tmp_path / "c")
    cert_path, _ = WebhookCerts(renamed, store, lambda c, k: None, now=clock).ensure()
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "other.vgpu-system.svc" in names.get_values_for_type(x509.DNSName)


def test_rotation_must_start_before_expiry() -> None:
    with pytest.raises(ValidationError, match=r"rotate_before_days \(30\) must be less than validity_days \(20\)"):
        WebhookCertsConfig(secret_namespace="x", validity_days=20, rotate_before_days=30)


class StopAfter:
    """A stop Event whose `wait` returns at once: False `rounds` times, then True."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def wait(self, timeout: float | None = None) -> bool:
        self.rounds -= 1
        return self.rounds < 0


def test_the_rotation_loop_survives_a_failing_check_and_rotates_on_the_next(
    tmp_path: Path,
) -> None:
    store, clock, reloads = FakeWebhookTLS(), Clock(), []
    certs = certs_for(tmp_path, store, clock, reloads=reloads)
    certs.ensure()
    clock.now += datetime.timedelta(days=61)
    real_load, calls = store.load, []

    def flaky_load() -> StoredCerts | None:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("API unreachable")
        return real_load()

    store.load = flaky_load  # type: ignore[method-assign]
    certs.run(StopAfter(2), interval_s=0)  # type: ignore[arg-type]
    assert len(reloads) == 1
