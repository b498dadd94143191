"""Issue 17 through the real plugin process: what it served stays counted whatever the tenant
writes on its pod, across kill -9; pods HAMi's plugin served (in the kubelet's checkpoint) count
from the start; with takeover on, pods HAMi's scheduler placed are served.

No admission policy here: the emulator lets a tenant patch any annotation on its own pod.
"""

import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tests.e2e.device_plugin.hami_plugin import HamiPlugin
from tests.e2e.device_plugin.harness import NODE, UUID_A, UUID_B, PluginEnv
from tests.e2e.device_plugin.test_device_plugin import gpu_container, pod, schedule
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION
from vgpu.domain.vendor import NVIDIA

Start = Callable[..., PluginEnv]
HALF_A = f"{UUID_A},NVIDIA,20000,0:;"  # of a 32768 MiB card: two do not fit
HAMI_SPLIT = 10  # HAMi's deviceSplitCount by default
TENANT_EDITS: dict[str, dict[str, str | None]] = {
    "garbled signature": {GRANT_SIGNATURE_ANNOTATION: "2026-01:AAAA"},
    "bind phase failed": {"hami.io/bind-phase": "failed"},
    "grant removed": {NVIDIA.allocated_annotation: None},
}


def refused_over_capacity(env: PluginEnv, name: str, replica: int) -> str:
    schedule(env, name, HALF_A, [gpu_container("main")])
    with pytest.raises(grpc.RpcError) as err:
        env.kubelet.allocate([f"{UUID_A}-{replica}"])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"card {UUID_A} would be over capacity" in err.value.details(), err.value.details()
    assert pod(env, name)["hami.io/bind-phase"] == "failed"
    details: str = err.value.details()
    return details


def uid_of(env: PluginEnv, name: str) -> str:
    found = env.api.get(f"/api/v1/namespaces/default/pods/{name}") or {}
    uid: str = found["metadata"]["uid"]
    return uid


def hami_pod(env: PluginEnv, name: str, grants: str, bind_phase: str) -> str:
    """A pod as HAMi's scheduler leaves it (no signature, schedulerName hami-scheduler); its uid."""
    waiting = bind_phase == "allocating"
    schedule(env, name, grants, [gpu_container("main")], bind_phase=bind_phase, lock=waiting,
             ring=None, scheduler_name="hami-scheduler")  # fmt: skip
    return uid_of(env, name)


def start_beside_hamis_running_pod(env: PluginEnv) -> str:
    """HAMi's plugin served `hami-running` 20000 MiB of card A, so the kubelet's checkpoint
    records it; then HAMi's plugin leaves the node and vgpu's starts. Returns the pod's uid."""
    env.kubelet.start()
    hami = HamiPlugin(env.api, NODE, env.plugin_dir, [UUID_A, UUID_B], HAMI_SPLIT).start()
    try:
        assert env.kubelet.wait_for(lambda: bool(env.kubelet.registrations))
        uid = hami_pod(env, "hami-running", HALF_A, bind_phase="allocating")
        env.kubelet.allocate([f"{UUID_A}-7"])
    finally:
        hami.stop()
    env.start()
    assert env.kubelet.wait_for(
        lambda: env.kubelet.registrations[-1].endpoint == "nvidia-gpu.sock"
    ), env.log()
    return uid


@pytest.mark.parametrize("edit", TENANT_EDITS.values(), ids=TENANT_EDITS.keys())
def test_a_tenant_editing_its_served_pod_frees_nothing_even_after_kill_9(
    start_plugin: Start, edit: dict[str, Any]
) -> None:
    env = start_plugin()
    schedule(env, "running", HALF_A, [gpu_container("main")])
    env.kubelet.allocate([f"{UUID_A}-0"])
    path = "/api/v1/namespaces/default/pods/running"

    env.api.merge_patch(path, {"metadata": {"annotations": edit}})

    details = refused_over_capacity(env, "second", 1)
    assert "default/running by its served record" in details

    env.kill(env.processes[-1])
    env.start()
    assert env.kubelet.wait_for(lambda: len(env.kubelet.registrations) >= 2), env.log()

    refused_over_capacity(env, "third", 2)
    served = json.loads((env.state_dir / "served.json").read_text())
    assert served["node"] == NODE
    assert [p["pod"] for p in served["pods"].values()] == ["default/running"]


def test_pods_hami_served_before_the_plugin_started_are_counted(plugin_env: PluginEnv) -> None:
    uid = start_beside_hamis_running_pod(plugin_env)

    (entry,) = plugin_env.kubelet.checkpoint.entries()
    assert (entry["PodUID"], entry["ContainerName"], entry["DeviceIDs"]) == (
        uid,
        "main",
        {"-1": [f"{UUID_A}-7"]},
    )
    details = refused_over_capacity(plugin_env, "second", 0)

    assert "default/hami-running by its kubelet checkpoint" in details
    assert plugin_env.wait_for_log(
        "1 of 1 GPU pods counted here hold unsigned grants (default/hami-running)"
    )


def test_taking_over_serves_the_pods_hamis_scheduler_placed_within_capacity(
    plugin_env: PluginEnv,
) -> None:
    plugin_env.extra_env["VGPU_TAKEOVER__FROM_HAMI"] = "true"
    start_beside_hamis_running_pod(plugin_env)
    hami_pod(plugin_env, "too-big", HALF_A, bind_phase="allocating")

    with pytest.raises(grpc.RpcError) as err:
        plugin_env.kubelet.allocate([f"{UUID_A}-0"])
    assert f"card {UUID_A} would be over capacity" in err.value.details()

    hami_pod(plugin_env, "fits", f"{UUID_B},NVIDIA,20000,0:;", bind_phase="allocating")
    (served,) = plugin_env.kubelet.allocate([f"{UUID_B}-0"]).container_responses

    assert served.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "20000m"
    assert pod(plugin_env, "fits")["hami.io/bind-phase"] == "success"
    assert "serving takeover from HAMi (takeover.from_hami)" in plugin_env.log()
    assert uid_of(plugin_env, "fits") in (plugin_env.state_dir / "served.json").read_text()
