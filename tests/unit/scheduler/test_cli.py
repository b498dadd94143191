"""`vgpu scheduler` on the command line: help, and clean exits for bad settings."""

from pathlib import Path

import pytest

from tests.certs import Authority
from vgpu.app.cli import main


def test_help_lists_the_flags_and_endpoints(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["scheduler", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for flag in [
        "--config",
        "--tls-cert",
        "--tls-key",
        "--listen",
        "--extender-listen",
        "--metrics-listen",
        "--explain-listen",
        "--fake-cluster",
        "--kubeconfig",
    ]:
        assert flag in text
    for route in ["/webhook", "/filter", "/prioritize", "/bind", "/readyz", "/metrics", "/explain"]:
        assert route in text
    assert "VGPU_" in text


def test_a_bad_setting_exits_2_with_the_field_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VGPU_LISTEN_PORT", "99999")
    assert main(["scheduler", "--fake-cluster", "x.yaml"]) == 2
    assert "listen_port" in capsys.readouterr().err


def test_a_bad_fake_cluster_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("nodes: [{name: n, gpus: [{}]}]")
    assert main(["scheduler", "--fake-cluster", str(path)]) == 2
    assert "nodes[0].gpus[0].uuid" in capsys.readouterr().err


def test_unusable_tls_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cert = tmp_path / "tls.crt"
    cert.write_text("not a certificate")
    args = ["scheduler", "--fake-cluster", "x", "--tls-cert", str(cert), "--tls-key", str(cert)]
    assert main(args) == 2
    assert "cannot use TLS certificate" in capsys.readouterr().err


def test_listen_flag_is_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scheduler", "--listen", "0.0.0.0:notaport", "--fake-cluster", "x"]) == 2
    assert "listen_port" in capsys.readouterr().err


def test_an_exposed_plain_extender_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scheduler", "--extender-listen", "0.0.0.0:8888", "--fake-cluster", "x"]) == 2
    err = capsys.readouterr().err
    assert "extender.address '0.0.0.0' is not a loopback address" in err
    assert "[from command line]" in err


def test_an_exposed_explain_listener_exits_2_unless_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["scheduler", "--explain-listen", "0.0.0.0:9396", "--fake-cluster", "x"]) == 2
    err = capsys.readouterr().err
    assert "explain.address '0.0.0.0' is not a loopback address" in err
    assert "[from command line]" in err


def test_an_unusable_client_ca_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = Authority.create(tmp_path, "ca")
    server = ca.issue("extender")
    bad = tmp_path / "client-ca.crt"
    bad.write_text("not a CA")
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        f"extender: {{address: 0.0.0.0, tls_cert: {server.cert}, tls_key: {server.key}, "
        f"client_ca: {bad}}}"
    )
    assert main(["scheduler", "--config", str(config), "--fake-cluster", "x"]) == 2
    assert f"cannot use client CA {bad}" in capsys.readouterr().err
