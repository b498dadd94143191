"""Throw-away X.509 material for TLS tests: a CA, and server or client certificates it signs.

ca = Authority.create(tmp_path, "test CA")
server = ca.issue("server", dns=["localhost"], ip=["127.0.0.1"])   # -> Pair(cert, key)
client = ca.issue("kube-scheduler", client=True)
"""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vgpu.app.x509_parts import certificate_builder


@dataclass(frozen=True)
class Pair:
    """PEM files of a certificate and its private key."""

    cert: Path
    key: Path

    def serial(self) -> int:
        return x509.load_pem_x509_certificate(self.cert.read_bytes()).serial_number


@dataclass(frozen=True)
class Authority:
    """A self-signed CA in `directory`; `cert` is its PEM certificate (a trust root)."""

    directory: Path
    name: str
    cert: Path
    _key: ec.EllipticCurvePrivateKey
    _certificate: x509.Certificate

    @classmethod
    def create(cls, directory: Path, name: str) -> "Authority":
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        certificate = (
            _builder(subject, subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        path = directory / f"{_file_name(name)}-ca.crt"
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return cls(directory, name, path, key, certificate)

    def issue(
        self,
        name: str,
        *,
        dns: tuple[str, ...] = ("localhost",),
        ip: tuple[str, ...] = ("127.0.0.1",),
        client: bool = False,
    ) -> Pair:
        """A leaf certificate for `name`: server (with those SANs) or, with `client`, client."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            _builder(subject, self._certificate.subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if not client:
            names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        stem = (
            self.directory
            / f"{_file_name(self.name)}-{_file_name(name)}-{certificate.serial_number}"
        )
        cert_path, key_path = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return Pair(cert_path, key_path)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return certificate_builder(subject, issuer, public_key, now, now + datetime.timedelta(days=1))


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)
