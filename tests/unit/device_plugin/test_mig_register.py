"""A GPU in MIG mode registers as HAMi v2.10 does (docs/protocol.md#mig-register-annotation): mode `mig`, its
`migProfiles`, unscaled memory and the largest instance count, so the scheduler sees it."""

import json
from pathlib import Path

from dependency_injector import providers

from tests.unit.device_plugin.builders import NODE
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.adapters.fake.kubelet import FakeKubelet
from vgpu.app.device_plugin.config import load_config
from vgpu.app.device_plugin.container import DevicePluginContainer
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.domain import NVIDIA
from vgpu.domain.inventory import GpuInfo, SharingConfig
from vgpu.domain.mig import MigPlacement, MigProfile
from vgpu.domain.node import ClusterNode

A100 = GpuInfo("GPU-mig", 0, "NVIDIA A100-SXM4-40GB", 40960, mig_enabled=True)
BARE = GpuInfo("GPU-bare", 1, "NVIDIA A100-SXM4-40GB", 40960, mig_enabled=True)
T4 = GpuInfo("GPU-t4", 2, "Tesla T4", 15360)
PROFILES = (
    MigProfile("1g.5gb", 1, 4864, 15, tuple(MigPlacement(i, 1) for i in range(7)), instances=7),
    MigProfile("3g.20gb", 3, 19968, 43, (MigPlacement(0, 4), MigPlacement(4, 4)), instances=2),
)
SCALED = SharingConfig(split_count=4, memory_scaling=2.0, core_scaling=1.5)


def test_a_mig_card_carries_its_profiles_and_hami_count_rule() -> None:
    state = GpuState([A100, T4], SCALED, mig_profiles={"GPU-mig": PROFILES})
    mig, shared = state.registered_devices()
    assert (mig.mode, mig.count, mig.memory, mig.cores) == ("mig", 7, 40960, 100)
    assert mig.mig_profiles == PROFILES
    assert (shared.mode, shared.count, shared.memory, shared.cores) == ("hami-core", 4, 30720, 150)
    assert shared.mig_profiles == ()


def test_a_mig_card_without_a_known_profile_is_not_registered() -> None:
    state = GpuState([A100, BARE, T4], SCALED, mig_profiles={"GPU-mig": PROFILES})
    assert [d.uuid for d in state.registered_devices()] == ["GPU-mig", "GPU-t4"]


def test_the_plugin_publishes_mig_templates_the_scheduler_reads_back(tmp_path: Path) -> None:
    config = load_config(overrides={"node_name": NODE, "hook_path": str(tmp_path)})
    cluster = FakeCluster()
    cluster.put_node(ClusterNode(name=NODE))
    container = DevicePluginContainer(config=config)
    container.cluster.override(providers.Object(cluster))
    gpus = FakeGpus([A100, BARE, T4], mig_profiles={"GPU-mig": PROFILES})
    container.gpu_port.override(providers.Object(gpus))
    container.kubelet.override(providers.Object(FakeKubelet()))
    container.grant_keys.override(providers.Object(FakeGrantKeys()))

    assert container.registrar().sync()

    node = cluster.get_node(NODE)
    assert node is not None
    raw = json.loads(node.annotations[NVIDIA.register_annotation])
    assert [(d["id"], d["mode"], d["count"]) for d in raw] == [
        ("GPU-mig", "mig", 7),
        ("GPU-t4", "hami-core", 10),
    ]
    assert raw[0]["migProfiles"][1] == {
        "name": "3g.20gb",
        "memoryMB": 19968,
        "core": 43,
        "sliceCount": 3,
        "placements": [{"start": 0, "size": 4}, {"start": 4, "size": 4}],
    }
    seen = {d.uuid: d for d in node.devices(NVIDIA)}
    assert seen["GPU-mig"].mode == "mig"
    # what the scheduler reads back: everything but NVML's instance count, which stays local
    assert [(p.name, p.memory_mib, p.placements) for p in seen["GPU-mig"].mig_profiles] == [
        (p.name, p.memory_mib, p.placements) for p in PROFILES
    ]


def test_the_plugin_manages_mig_instances_only_where_gpus_are_in_mig_mode(tmp_path: Path) -> None:
    config = load_config(overrides={"node_name": NODE, "hook_path": str(tmp_path)})

    def manager_for(gpus: FakeGpus) -> object:
        container = DevicePluginContainer(config=config)
        container.cluster.override(providers.Object(FakeCluster()))
        container.grant_keys.override(providers.Object(FakeGrantKeys()))
        container.gpu_port.override(providers.Object(gpus))
        return container.mig()

    mig = manager_for(FakeGpus([A100, T4], mig_profiles={"GPU-mig": PROFILES}))
    assert isinstance(mig, MigManager) and mig.active
    shared = manager_for(FakeGpus([T4]))
    assert isinstance(shared, MigManager) and not shared.active
