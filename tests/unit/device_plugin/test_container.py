"""The composition root wires the node config into every part, with adapters swapped for fakes."""

import json
import logging
from pathlib import Path

import pytest
from dependency_injector import providers

from tests.unit.device_plugin.builders import GPUS, NODE, UUID_A, UUID_B
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.adapters.fake.kubelet import FakeKubelet
from vgpu.app.device_plugin.config import load_config
from vgpu.app.device_plugin.container import DevicePluginContainer
from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Pod


def test_node_config_overrides_reach_the_kubelet_and_the_node_annotation(tmp_path: Path) -> None:
    node_config = tmp_path / "config.json"
    node_config.write_text(
        json.dumps(
            {
                "nodeconfig": [
                    {
                        "name": NODE,
                        "devicesplitcount": 2,
                        "enablegetpreferredallocation": False,
                        "filterdevices": {"uuid": [UUID_B]},
                    }
                ]
            }
        )
    )
    config = load_config(
        overrides={"node_name": NODE, "node_config_file": node_config, "hook_path": str(tmp_path)}
    )
    cluster = FakeCluster()
    cluster.put_node(ClusterNode(name=NODE))
    kubelet = FakeKubelet()
    container = DevicePluginContainer(config=config)
    container.cluster.override(providers.Object(cluster))
    container.gpu_port.override(providers.Object(FakeGpus(GPUS)))
    container.kubelet.override(providers.Object(kubelet))
    container.grant_keys.override(providers.Object(FakeGrantKeys()))

    container.session().start()
    container.registrar().sync()
    _, devices = container.gpus().plugin_devices()

    assert [d.id for d in devices] == [f"{UUID_A}-0", f"{UUID_A}-1"]
    ((resource, options),) = kubelet.registered
    assert resource == "nvidia.com/gpu" and not options.get_preferred_allocation_available
    assert not container.service().options().get_preferred_allocation_available
    node = cluster.get_node(NODE)
    assert node is not None
    registered = json.loads(node.annotations["hami.io/node-nvidia-register"])
    assert [(d["id"], d["count"]) for d in registered] == [(UUID_A, 2)]


def test_signing_picks_how_grants_are_trusted() -> None:
    signed = DevicePluginContainer(config=load_config(overrides={"node_name": NODE}))
    signed.grant_keys.override(providers.Object(FakeGrantKeys()))
    unsigned = DevicePluginContainer(
        config=load_config(env={"VGPU_SIGNING__ENABLED": "false"}, overrides={"node_name": NODE})
    )

    pod = Pod(
        "default",
        "p",
        uid="u1",
        node_name=NODE,
        scheduler_name="vgpu-scheduler",
        annotations={
            "hami.io/vgpu-node": NODE,
            "hami.io/vgpu-devices-allocated": f"{UUID_A},NVIDIA,1000,10:;",
        },
    )

    assert "has no vgpu.io/grant-signature" in (signed.trust().problem(pod) or "")
    assert unsigned.trust().problem(pod) is None


def test_takeover_believes_unsigned_grants_of_hamis_scheduler_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def hami_pod(scheduler: str) -> Pod:
        return Pod(
            "default",
            "p",
            uid="u1",
            node_name=NODE,
            scheduler_name=scheduler,
            annotations={
                "hami.io/vgpu-node": NODE,
                "hami.io/vgpu-devices-allocated": f"{UUID_A},NVIDIA,1000,10:;",
            },
        )

    takeover = DevicePluginContainer(
        config=load_config(
            env={"VGPU_TAKEOVER__FROM_HAMI": "true"}, overrides={"node_name": NODE}
        )
    )
    takeover.grant_keys.override(providers.Object(FakeGrantKeys()))
    plain = DevicePluginContainer(config=load_config(overrides={"node_name": NODE}))
    plain.grant_keys.override(providers.Object(FakeGrantKeys()))

    with caplog.at_level(logging.INFO):
        assert takeover.trust().problem(hami_pod("hami-scheduler")) is None
    assert "has no vgpu.io/grant-signature" in (
        takeover.trust().problem(hami_pod("default-scheduler")) or ""
    )
    assert "has no vgpu.io/grant-signature" in (plain.trust().problem(hami_pod("hami-scheduler")) or "")
    assert "serving takeover from HAMi (takeover.from_hami)" in caplog.text
    assert "unsigned grants on pods that name hami-scheduler" in caplog.text


def test_the_served_record_is_kept_under_state_dir(tmp_path: Path) -> None:
    config = load_config(overrides={"node_name": NODE, "state_dir": tmp_path / "state"})

    container = DevicePluginContainer(config=config)

    assert container.served_store().location == str(tmp_path / "state" / "served.json")
