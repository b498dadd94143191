"""ListAndWatch tells the kubelet each GPU's NUMA node, for its Topology Manager, only when
`numa_topology` is on, and never a NUMA node the plugin does not know."""

import json
from collections.abc import Callable

from tests.e2e.device_plugin.harness import NODE, SPLIT, UUID_A, UUID_B, PluginEnv

Start = Callable[..., PluginEnv]
REGISTER = "hami.io/node-nvidia-register"


def _gpus(env: PluginEnv, numa_a: int, numa_b: int) -> None:
    env.gpu_file.write_text(
        "gpus:\n"
        f"  - uuid: {UUID_A}\n    name: NVIDIA H200\n    memory_mib: 143771\n"
        f"    numa: {numa_a}\n"
        f"  - uuid: {UUID_B}\n    name: NVIDIA H200\n    memory_mib: 143771\n"
        f"    numa: {numa_b}\n"
    )


def _first_list(env: PluginEnv) -> dict[str, tuple[int, ...]]:
    assert env.kubelet.wait_for(lambda: bool(env.kubelet.numa_lists))
    return env.kubelet.numa_lists[0]


def test_each_replica_carries_its_gpus_numa_node_and_an_unknown_one_none(
    plugin_env: PluginEnv, start_plugin: Start
) -> None:
    _gpus(plugin_env, numa_a=-1, numa_b=1)
    plugin_env.extra_env["VGPU_NUMA_TOPOLOGY"] = "true"

    env = start_plugin()

    sent = _first_list(env)
    assert sent == {
        **{f"{UUID_A}-{i}": () for i in range(SPLIT)},  # unknown: no topology, not node 0
        **{f"{UUID_B}-{i}": (1,) for i in range(SPLIT)},
    }
    assert env.wait_for_log(f"GPU 0 {UUID_A}: NVIDIA H200, 143771 MiB, NUMA unknown")
    assert env.kubelet.wait_for(lambda: REGISTER in env.node_annotations())
    registered = json.loads(env.api.get(f"/api/v1/nodes/{NODE}")["metadata"]["annotations"][REGISTER])
    assert [card.get("numa", 0) for card in registered] == [0, 1]  # HAMi's format: 0 if unknown


def test_no_replica_carries_a_numa_node_by_default(
    plugin_env: PluginEnv, start_plugin: Start
) -> None:
    _gpus(plugin_env, numa_a=0, numa_b=1)

    env = start_plugin()

    assert set(_first_list(env).values()) == {()}
    assert env.wait_for_log("no NUMA node is sent to the kubelet (numa_topology off)")
