"""The composition root wires config, cluster, state, service and app; parts can be swapped."""

import threading
from pathlib import Path

import pytest
from cryptography import x509
from dependency_injector import providers
from fastapi.testclient import TestClient

from tests.unit.scheduler.builders import KEYS, a40_node, manifest
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.adapters.fake.webhook_tls import FakeWebhookTLS
from vgpu.app.scheduler.certs import WebhookCertsConfig
from vgpu.app.scheduler.config import (
    ExplainListener,
    ExtenderListener,
    MetricsListener,
    SchedulerConfig,
)
from vgpu.app.scheduler.container import ClusterBackend, SchedulerContainer
from vgpu.domain import pod_from_manifest


def test_a_fake_cluster_file_gives_a_working_app(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: [{name: n1, gpus: [{uuid: GPU-a, type: NVIDIA L4, memory: 24000}]}]")
    container = SchedulerContainer(config=SchedulerConfig(), fake_cluster_file=path)
    lifetime = container.lifetime()
    lifetime.start()
    try:
        container.runtime().sync_now()
        webhook = TestClient(container.webhook_app())
        extender = TestClient(container.extender_app())
        assert webhook.get("/readyz").status_code == 200
        args = {"Pod": manifest("p", gpu=1, gpumem=1000), "Nodes": None, "NodeNames": ["n1"]}
        assert extender.post("/filter", json=args).json()["NodeNames"] == ["n1"]
        cluster = container.backend().port
        pod = cluster.get_pod("default", "p")  # created by the fake mode's pod recorder
        assert pod is not None and pod.annotations["hami.io/vgpu-node"] == "n1"
    finally:
        lifetime.stop()
    # the filter's Event went through the queue, which stop drained
    assert [e[2] for e in cluster.events] == ["FilteringSucceed"]
    assert container.service() is container.service()  # one service per process


def test_the_listeners_follow_the_config(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: []")
    config = SchedulerConfig(
        listen_port=8443,
        extender=ExtenderListener(port=9999),
        metrics=MetricsListener(address="127.0.0.2", port=9000),
        explain=ExplainListener(port=9001),
    )
    container = SchedulerContainer(config=config, fake_cluster_file=path)
    listeners = {x.name: (x.address, x.port, x.tls) for x in container.listeners()}
    assert listeners == {
        "webhook": ("127.0.0.1", 8443, None),
        "extender": ("127.0.0.1", 9999, None),
        "metrics": ("127.0.0.2", 9000, None),
        "explain": ("127.0.0.1", 9001, None),
    }


def test_explanations_are_served_on_the_loopback_listener_only(tmp_path: Path) -> None:
    """They tell any namespace's requests, card UUIDs and free memory: never on the metrics
    port, which is open to the network for Prometheus."""
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: [{name: n1, gpus: [{uuid: GPU-a, type: NVIDIA L4, memory: 24000}]}]")
    container = SchedulerContainer(config=SchedulerConfig(), fake_cluster_file=path)
    container.runtime().sync_now()
    args = {"Pod": manifest("big", gpu=1, gpumem=90000), "Nodes": None, "NodeNames": ["n1"]}
    assert TestClient(container.extender_app()).post("/filter", json=args).json()["Error"] == ""
    apps = {x.name: (x.address, x.app) for x in container.listeners()}
    scrape, explain = TestClient(apps["metrics"][1]), TestClient(apps["explain"][1])
    assert apps["explain"][0] == "127.0.0.1" and apps["metrics"][0] == "0.0.0.0"
    assert scrape.get("/explain/default/big").status_code == 404
    assert "hami_scheduler_is_leader" in scrape.get("/metrics").text
    answer = explain.get("/explain/default/big").json()
    assert answer["pod"] == "default/big" and answer["fits"] is False
    assert explain.get("/metrics").status_code == 404


def test_embedders_can_swap_the_cluster_backend() -> None:
    fake = FakeCluster()
    fake.put_node(a40_node("node1"))
    container = SchedulerContainer(config=SchedulerConfig(combine_scores=True))
    container.backend.override(providers.Object(ClusterBackend(fake, FakeGrantKeys(KEYS))))
    container.runtime().start()
    try:
        container.runtime().sync_now()
        fake.put_pod(pod_from_manifest(manifest("p", gpu=1)))
        result = container.service().filter(manifest("p", gpu=1), ["node1"], None)
        assert result.node_names == ["node1"]
    finally:
        container.runtime().stop()


class HangingEvents(FakeCluster):
    """A cluster whose Event writes hang, as a slow API server's would."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def record_event(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        self.entered.set()
        assert self.release.wait(60), "the test never released the event sink"
        super().record_event(namespace, pod, reason, message, warning=warning)


def test_a_hanging_event_sink_does_not_hold_up_filter_or_bind() -> None:
    cluster = HangingEvents()
    cluster.put_node(a40_node("node1"))
    container = SchedulerContainer(config=SchedulerConfig())
    container.backend.override(providers.Object(ClusterBackend(cluster, FakeGrantKeys(KEYS))))
    lifetime = container.lifetime()
    lifetime.start()
    try:
        container.runtime().sync_now()
        extender = TestClient(container.extender_app())
        for name in ("a", "b"):
            body = manifest(name, gpu=1, gpumem=1000)
            cluster.put_pod(pod_from_manifest(body))
            args = {"Pod": body, "Nodes": None, "NodeNames": ["node1"]}
            assert extender.post("/filter", json=args).json()["NodeNames"] == ["node1"]
            assert cluster.entered.wait(30)  # the first Event is stuck in the API call
        binding = {"PodName": "a", "PodNamespace": "default", "PodUID": "uid-a", "Node": "node1"}
        assert extender.post("/bind", json=binding).json() == {"Error": ""}
        assert cluster.events == []  # nothing written yet: every verb answered regardless
        assert container.events().pending() == 2  # a's filter Event is in the hanging call
    finally:
        cluster.release.set()
        lifetime.stop()
    assert [(e[1], e[2]) for e in cluster.events] == [
        ("a", "FilteringSucceed"),
        ("b", "FilteringSucceed"),
        ("a", "BindingSucceed"),
    ]


def test_self_managed_webhook_certificates_are_issued_trusted_and_served(tmp_path: Path) -> None:
    store = FakeWebhookTLS()
    certs = WebhookCertsConfig(secret_namespace="vgpu-system", cert_dir=tmp_path)
    config = SchedulerConfig(
        webhook_tls=certs, tls_cert=tmp_path / "tls.crt", tls_key=tmp_path / "tls.key"
    )
    container = SchedulerContainer(config=config)
    backend = ClusterBackend(FakeCluster(), FakeGrantKeys(KEYS), webhook_certs=store)
    container.backend.override(providers.Object(backend))

    tls = container.webhook_tls()

    assert tls is not None and store.ca_bundle is not None  # the webhook trusts our CA
    served = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "vgpu-scheduler.vgpu-system.svc" in names.get_values_for_type(x509.DNSName)
    assert container.lifetime().certs is not None  # and they are kept fresh while serving


def test_without_self_managed_certificates_the_cluster_is_not_read_for_tls() -> None:
    container = SchedulerContainer(config=SchedulerConfig())
    container.backend.override(providers.Callable(pytest.fail, "the backend was built"))
    assert container.webhook_tls() is None


def test_the_node_handshake_follows_the_configured_hami_version(tmp_path: Path) -> None:
    fake = FakeCluster()
    fake.put_node(a40_node("node1"))
    container = SchedulerContainer(config=SchedulerConfig(hami_version="v2.8"))
    container.backend.override(providers.Object(ClusterBackend(fake, FakeGrantKeys(KEYS))))
    handshake = container.handshake()
    assert handshake is not None
    handshake.pass_now()
    node = fake.get_node("node1")
    assert node is not None and "hami.io/node-handshake" not in node.annotations  # v2.8: no stamp
    container = SchedulerContainer(config=SchedulerConfig())
    container.backend.override(providers.Object(ClusterBackend(fake, FakeGrantKeys(KEYS))))
    handshake = container.handshake()
    assert handshake is not None
    handshake.pass_now()
    node = fake.get_node("node1")
    assert node is not None and node.annotations["hami.io/node-handshake"].startswith("Requesting_")
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: []")
    assert SchedulerContainer(config=SchedulerConfig(), fake_cluster_file=path).handshake() is None


def test_an_unknown_hami_version_is_refused() -> None:
    with pytest.raises(ValueError, match="hami_version"):
        SchedulerConfig(hami_version="v3.0")
