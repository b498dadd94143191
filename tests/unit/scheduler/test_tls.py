"""The listeners' TLS contexts: the webhook's can be reloaded, the extender's demands a client."""

import re
import ssl
from pathlib import Path

import pytest

from tests.certs import Authority
from vgpu.app.scheduler.tls import TlsError, WebhookTls, mutual_tls_context


def test_the_extender_context_requires_a_client_certificate(tmp_path: Path) -> None:
    ca = Authority.create(tmp_path, "ca")
    server = ca.issue("extender")
    context = mutual_tls_context(server.cert, server.key, ca.cert)
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "ca"),),)]


def test_a_bad_pair_names_its_files(tmp_path: Path) -> None:
    ca = Authority.create(tmp_path, "ca")
    one, other = ca.issue("one"), ca.issue("other")
    with pytest.raises(
        TlsError, match=re.escape(f"cannot use TLS certificate {one.cert} / key {other.key}")
    ):
        mutual_tls_context(one.cert, other.key, ca.cert)
    with pytest.raises(TlsError, match="cannot use client CA"):
        mutual_tls_context(one.cert, one.key, tmp_path / "missing.crt")


def test_reload_refuses_a_bad_pair_and_swaps_a_good_one_in_place(tmp_path: Path) -> None:
    ca = Authority.create(tmp_path, "ca")
    first, second = ca.issue("first"), ca.issue("second")
    tls = WebhookTls(first.cert, first.key)
    context = tls.context
    with pytest.raises(TlsError, match=re.escape(str(second.cert))):
        tls.reload(second.cert, first.key)  # a certificate with another's key
    assert tls.context is context
    tls.reload(second.cert, second.key)
    assert tls.context is context  # reloaded in place: the listener keeps the same object
