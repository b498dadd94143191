"""The three listeners of a real `vgpu scheduler` process: each port serves only its routes,
the extender takes only kube-scheduler's client certificate, and the webhook certificate is
reloaded in place."""

import shutil
import signal
import socket
import ssl
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from tests.certs import Authority, Pair
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import ExtenderClientTls, wait_until
from tests.e2e.scheduler.test_fake_cluster import pod, write_cluster
from vgpu.app.cli import main


def filter_args(name: str) -> dict[str, object]:
    return {"Pod": pod(name, **{"nvidia.com/gpu": 1}), "Nodes": None, "NodeNames": ["node1"]}


def test_each_port_serves_only_its_own_routes(tmp_path: Path, launch: Launch) -> None:
    scheduler = launch("--fake-cluster", write_cluster(tmp_path))
    webhook, extender, scrape = scheduler.client, scheduler.extender, scheduler.scrape
    assert webhook.post("/filter", json=filter_args("p")).status_code == 404
    assert webhook.get("/metrics").status_code == 404
    assert extender.post("/webhook", json={}).status_code == 404
    assert extender.get("/metrics").status_code == 404
    assert extender.get("/healthz").text == "ok"
    assert scrape.post("/filter", json=filter_args("p")).status_code == 404
    assert scrape.get("/healthz").status_code == 404
    assert "hami_scheduler_is_leader 1.0" in scrape.get("/metrics").text
    assert extender.post("/filter", json=filter_args("p")).json()["NodeNames"] == ["node1"]
    # the last decision on a pod tells its requests and cards: on the loopback listener only
    assert scrape.get("/explain/default/p").status_code == 404
    explained = scheduler.explainer.get("/explain/default/p").json()
    assert explained["pod"] == "default/p" and explained["placement"]["node"] == "node1"
    assert scheduler.explainer.get("/metrics").status_code == 404


def test_a_taken_port_exits_2_naming_the_listener(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All sockets are bound before anything starts, so a taken port is a clean exit."""
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes: []")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["scheduler", "--fake-cluster", str(cluster), "--listen", "127.0.0.1:0"]
        args += ["--extender-listen", "127.0.0.1:0", "--metrics-listen", f"127.0.0.1:{port}"]
        assert main(args) == 2
    assert f"cannot serve the metrics listener on 127.0.0.1:{port}" in capsys.readouterr().err


def test_sigterm_stops_every_listener_and_runs_shutdown_once(
    tmp_path: Path, launch: Launch
) -> None:
    scheduler = launch("--fake-cluster", write_cluster(tmp_path))
    scheduler.close()
    assert not scheduler.alive()
    assert scheduler.logs().count("scheduler stopped") == 1
    for port in (
        scheduler.port,
        scheduler.extender_port,
        scheduler.metrics_port,
        scheduler.explain_port,
    ):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Authority]:
    return {
        "server": Authority.create(tmp_path, "extender serving CA"),
        "client": Authority.create(tmp_path, "kube-scheduler client CA"),
        "rogue": Authority.create(tmp_path, "some other CA"),
    }


def test_the_extender_over_mutual_tls_takes_only_kube_schedulers_certificate(
    tmp_path: Path, launch: Launch, pki: dict[str, Authority]
) -> None:
    served = pki["server"].issue("vgpu-scheduler")
    env = {
        "VGPU_EXTENDER__TLS_CERT": str(served.cert),
        "VGPU_EXTENDER__TLS_KEY": str(served.key),
        "VGPU_EXTENDER__CLIENT_CA": str(pki["client"].cert),
    }
    kube_scheduler = ExtenderClientTls(
        pki["server"].cert, pki["client"].issue("kube-scheduler", client=True)
    )
    scheduler = launch(
        "--fake-cluster", write_cluster(tmp_path), env=env, extender_tls=kube_scheduler
    )
    assert scheduler.extender_url.startswith("https://")

    def attempt(client_tls: ExtenderClientTls) -> httpx.Response:
        with httpx.Client(verify=client_tls.context(), timeout=10) as client:
            return client.post(f"{scheduler.extender_url}/filter", json=filter_args("p"))

    anonymous = ExtenderClientTls(pki["server"].cert)
    impostor = ExtenderClientTls(
        pki["server"].cert, pki["rogue"].issue("kube-scheduler", client=True)
    )
    for refused in (anonymous, impostor):
        with pytest.raises(httpx.TransportError):  # the handshake fails: no HTTP answer at all
            attempt(refused)
    with pytest.raises(httpx.TransportError):
        httpx.post(scheduler.extender_url.replace("https", "http") + "/filter", timeout=10)

    reply = attempt(kube_scheduler)
    assert reply.status_code == 200 and reply.json()["NodeNames"] == ["node1"]
    assert scheduler.filter(pod("q", **{"nvidia.com/gpu": 1}), ["node1"])["Error"] == ""
    assert scheduler.alive()


def served_serial(port: int, root: Path) -> int:
    context = ssl.create_default_context(cafile=root)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_sighup_reloads_the_webhook_certificate_for_new_connections(
    tmp_path: Path, launch: Launch, pki: dict[str, Authority]
) -> None:
    ca = pki["server"]
    first, second = ca.issue("webhook"), ca.issue("webhook")
    live = Pair(tmp_path / "tls.crt", tmp_path / "tls.key")
    for source, target in ((first.cert, live.cert), (first.key, live.key)):
        shutil.copy(source, target)
    scheduler = launch("--fake-cluster", write_cluster(tmp_path), tls=(live, ca.cert))
    assert served_serial(scheduler.port, ca.cert) == first.serial()

    shutil.copy(second.cert, live.cert)
    shutil.copy(second.key, live.key)
    scheduler.signal(signal.SIGHUP)
    assert wait_until(lambda: served_serial(scheduler.port, ca.cert) == second.serial())
    assert scheduler.client.get("/readyz").status_code == 200

    shutil.copy(first.cert, live.cert)  # a half-written rotation: first's cert, second's key
    scheduler.signal(signal.SIGHUP)
    assert wait_until(lambda: "the old one stays in use" in scheduler.logs())
    assert served_serial(scheduler.port, ca.cert) == second.serial()
    assert scheduler.alive()
