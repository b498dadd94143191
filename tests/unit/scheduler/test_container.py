"""The composition root wires config, cluster, state, service and app; parts can be swapped."""

from pathlib import Path

from dependency_injector import providers
from fastapi.testclient import TestClient

from tests.unit.scheduler.builders import KEYS, a40_node, manifest
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.container import ClusterBackend, SchedulerContainer
from vgpu.domain import pod_from_manifest


def test_a_fake_cluster_file_gives_a_working_app(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: [{name: n1, gpus: [{uuid: GPU-a, type: NVIDIA L4, memory: 24000}]}]")
    container = SchedulerContainer(config=SchedulerConfig(), fake_cluster_file=path)
    with TestClient(container.app()) as client:
        container.runtime().sync_now()
        assert client.get("/readyz").status_code == 200
        args = {"Pod": manifest("p", gpu=1, gpumem=1000), "Nodes": None, "NodeNames": ["n1"]}
        assert client.post("/filter", json=args).json()["NodeNames"] == ["n1"]
        cluster = container.backend().port
        pod = cluster.get_pod("default", "p")  # created by the fake mode's pod recorder
        assert pod is not None and pod.annotations["hami.io/vgpu-node"] == "n1"
    assert container.service() is container.service()  # one service per process


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
