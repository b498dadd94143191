"""`--fake-cluster FILE`: nodes, pods and quotas from YAML; errors name the entry and field."""

from pathlib import Path

import pytest

from tests.unit.scheduler.builders import A40_UUIDS, KEYS, manifest, world
from vgpu.app.fake_mode import (
    FakeClusterError,
    PodRecorder,
    load_fake_cluster,
    sign_listed_grants,
)
from vgpu.domain import NVIDIA, decode_node_devices
from vgpu.domain.host import HostResources

EXAMPLE = f"""
nodes:
  - name: node1
    gpus:
      - {{uuid: {A40_UUIDS[0]}, type: NVIDIA A40, memory: 46068}}
      - {{uuid: {A40_UUIDS[1]}, type: NVIDIA A40, memory: 46068, numa: 1}}
    allocatable: {{cpu: "96", memory: 384Gi}}
  - name: cpu-node
quotas:
  - {{namespace: team, name: q, hard: {{limits.nvidia.com/gpumem: "20000"}}}}
pods:
  - metadata:
      name: running
      namespace: team
      annotations:
        hami.io/vgpu-node: node1
        hami.io/vgpu-devices-allocated: "{A40_UUIDS[0]},NVIDIA,15000,0:;"
    spec:
      nodeName: node1
      containers: [{{name: main, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
    status: {{phase: Running}}
"""


def test_the_file_fills_a_fake_cluster_the_service_follows(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(EXAMPLE)
    cluster = load_fake_cluster(path, NVIDIA)
    node = cluster.get_node("node1")
    assert node is not None
    devices = decode_node_devices(node.annotations[NVIDIA.register_annotation])
    assert [(d.uuid, d.index, d.count, d.cores, d.numa) for d in devices] == [
        (A40_UUIDS[0], 0, 10, 100, 0),
        (A40_UUIDS[1], 1, 10, 100, 1),
    ]
    sign_listed_grants(cluster, KEYS, NVIDIA)  # the scheduler signs what the file lists
    w = world(cluster=cluster)
    assert w.state.quota.used("team").memory == 15000
    assert w.state.ledger.view("node1").host == HostResources(96_000, 393_216)
    blocked = w.filter(manifest("next", "team", gpu=1, gpumem=6000), "node1")
    assert "ResourceQuotaNotFit" in blocked.failed["node1"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "nodes: [{name: n, gpus: [{uuid: g, type: t}]}]",
            "nodes[0].gpus[0].memory: Field required",
        ),
        ("nodes: [{name: n, gpus: [{uuid: g, type: t, memory: -1}]}]", "nodes[0].gpus[0].memory"),
        ("nodes: [{name: n, color: red}]", "nodes[0].color: Extra inputs"),
        ("pods: [{spec: {containers: 5}}]", "pods[0]: pod containers must be a list"),
        ("pods: [{spec: {containers: []}}]", "pods[0]: metadata.name is missing"),
        ("quotas: [{namespace: a}]", "quotas[0].name: Field required"),
        ("nodes: {name: n}", "nodes: Input should be a valid list"),
        (
            "nodes: [{name: n, gpus: [{uuid: g, type: t, memory: 1}], "
            "annotations: {hami.io/node-nvidia-register: '[]'}}]",
            "not both",
        ),
        ("[", "not valid YAML"),
        (
            "nodes: [{name: n}, {name: m, allocatable: {cpu: 8, memory: lots}}]",
            "nodes[1]: node status.allocatable.memory='lots'",
        ),
    ],
)
def test_bad_files_name_the_entry(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(FakeClusterError) as caught:
        load_fake_cluster(path, NVIDIA)
    assert says in str(caught.value)


def test_pods_the_scheduler_is_asked_about_are_created_once(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: []")
    cluster = load_fake_cluster(path, NVIDIA)
    recorder = PodRecorder(cluster)
    from vgpu.domain import pod_from_manifest

    pod = pod_from_manifest(manifest("p", gpu=1))
    recorder(pod)
    cluster.patch_pod_annotations("default", "p", {"a": "b"})
    recorder(pod)  # already there: kept as it is
    stored = cluster.get_pod("default", "p")
    assert stored is not None and stored.annotations == {"a": "b"}
