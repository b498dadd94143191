"""`vgpu device-plugin` as a process: registered with a kubelet, called like a kubelet calls it."""

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.e2e.device_plugin.harness import (
    NODE,
    RING,
    SPLIT,
    UUID_A,
    UUID_B,
    PluginEnv,
    gpu_file_text,
    key_secret_manifest,
)
from tests.e2e.k8s_emulator import pod_manifest
from vgpu.domain.nodelock import NodeLock
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, GrantClaim, KeyRing

REGISTER = "hami.io/node-nvidia-register"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
LOCK = "hami.io/mutex.lock"
SECRET = "/api/v1/namespaces/vgpu-system/secrets/vgpu-grant-keys"
Start = Callable[..., PluginEnv]


def schedule(
    env: PluginEnv,
    name: str,
    grants: str,
    containers: list[dict[str, Any]],
    *,
    bind_phase: str = "allocating",
    lock: bool = True,
    ring: KeyRing | None = RING,
    scheduler_name: str = "vgpu-scheduler",
) -> None:
    """Leave a pod as vgpu's scheduler does after filter and bind (grant signed, node locked);
    with `ring=None` and `scheduler_name="hami-scheduler"`, as HAMi's does (unsigned). A pod
    still allocating is the one the kubelet admits next: its GPU containers, init ones first."""
    uid = str(uuid.uuid4())
    annotations = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-time": "1700000000",
        "hami.io/bind-phase": bind_phase,
        "hami.io/bind-time": "1700000000",
        TO_ALLOCATE: grants,
        "hami.io/vgpu-devices-allocated": grants,
    }
    if ring is not None:
        claim = GrantClaim(uid, NODE, "1700000000", grants)
        annotations[GRANT_SIGNATURE_ANNOTATION] = ring.sign(claim)
    manifest = pod_manifest(
        "default", name, annotations=annotations, node_name=NODE, scheduler_name=scheduler_name
    )
    manifest["metadata"]["uid"] = uid
    manifest["spec"]["containers"] = [c for c in containers if not c.get("init")]
    manifest["spec"]["initContainers"] = [
        {k: v for k, v in c.items() if k != "init"} for c in containers if c.get("init")
    ]
    env.api.create("/api/v1/namespaces/default/pods", manifest)
    if bind_phase == "allocating":
        ordered = [*manifest["spec"]["initContainers"], *manifest["spec"]["containers"]]
        env.kubelet.admit(uid, [c["name"] for c in ordered if asks_for_gpus(c)])
    if lock:
        value = NodeLock(datetime.now(UTC), "default", name).encode()
        env.api.merge_patch(f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": {LOCK: value}}})


def asks_for_gpus(container: dict[str, Any]) -> bool:
    return "nvidia.com/gpu" in container.get("resources", {}).get("limits", {})


def gpu_container(name: str, count: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "cuda",
        "resources": {"limits": {"nvidia.com/gpu": count}},
        **extra,
    }


def pod(env: PluginEnv, name: str) -> dict[str, str]:
    found = env.api.get(f"/api/v1/namespaces/default/pods/{name}") or {}
    annotations: dict[str, str] = found.get("metadata", {}).get("annotations") or {}
    return annotations


def replicas(*uuids: str) -> list[str]:
    return [f"{u}-{i}" for u in uuids for i in range(SPLIT)]


def test_registers_and_lists_split_count_replicas_per_gpu(start_plugin: Start) -> None:
    env = start_plugin()

    (registration,) = env.kubelet.registrations
    assert registration.version == "v1beta1"
    assert registration.endpoint == "nvidia-gpu.sock"
    assert registration.resource_name == "nvidia.com/gpu"
    assert registration.requested_preferred and registration.preferred_available
    assert not registration.pre_start_required
    assert env.kubelet.wait_for(lambda: bool(env.kubelet.device_lists))
    first = env.kubelet.device_lists[0]
    assert first == [(i, "Healthy") for i in replicas(UUID_A, UUID_B)]
    assert (env.plugin_dir / "nvidia-gpu.sock").is_socket()

    assert env.kubelet.wait_for(lambda: REGISTER in env.node_annotations())
    registered = json.loads(env.node_annotations()[REGISTER])
    assert registered == [
        {"id": UUID_A, "count": SPLIT, "devmem": 32768, "devcore": 100,
         "type": "NVIDIA-Tesla V100-PCIE-32GB", "mode": "hami-core", "health": True},
        {"id": UUID_B, "index": 1, "count": SPLIT, "devmem": 32768, "devcore": 100,
         "type": "NVIDIA-Tesla V100-PCIE-32GB", "numa": 1, "mode": "hami-core", "health": True},
    ]  # fmt: skip


def test_a_scheduled_pod_gets_hami_core_envs_and_mounts(start_plugin: Start) -> None:
    env = start_plugin()
    schedule(env, "train", f"{UUID_B},NVIDIA,3000,30:;", [gpu_container("main")])

    preferred = env.kubelet.preferred(replicas(UUID_A, UUID_B), size=1)
    reply = env.kubelet.allocate(preferred)

    assert preferred == [f"{UUID_B}-0"]
    (container,) = reply.container_responses
    envs = dict(container.envs)
    vgpu = f"{env.hook}/vgpu"
    assert envs["NVIDIA_VISIBLE_DEVICES"] == UUID_B
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"].startswith(f"{vgpu}/")
    uid = (env.api.get("/api/v1/namespaces/default/pods/train") or {})["metadata"]["uid"]
    assert [(m.container_path, m.host_path, m.read_only) for m in container.mounts] == [
        (f"{vgpu}/libvgpu.so", f"{vgpu}/libvgpu.so", True),
        (vgpu, f"{vgpu}/containers/{uid}_main", False),
        ("/tmp/vgpulock", "/tmp/vgpulock", False),
        ("/etc/ld.so.preload", f"{vgpu}/ld.so.preload", True),
    ]
    assert (env.hook / "vgpu" / "containers" / f"{uid}_main").is_dir()
    annotations = pod(env, "train")
    assert annotations["hami.io/bind-phase"] == "success"
    assert annotations[TO_ALLOCATE] == ";"
    assert LOCK not in env.node_annotations()
    assert env.wait_for_log(f"Allocate for pod default/train container main: {UUID_B} 3000 MiB")


def test_a_multi_container_pod_is_served_container_by_container(start_plugin: Start) -> None:
    env = start_plugin()
    grants = f";{UUID_A},NVIDIA,2000,0:{UUID_B},NVIDIA,2000,0:;{UUID_A},NVIDIA,1000,10:;"
    schedule(
        env,
        "pipeline",
        grants,
        [
            {"name": "fetch", "image": "busybox", "init": True},
            gpu_container("trainer", 2),
            gpu_container("eval", env=[{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]),
        ],
    )

    first = env.kubelet.allocate([f"{UUID_A}-1", f"{UUID_B}-2"]).container_responses[0]
    after_first = pod(env, "pipeline")
    second = env.kubelet.allocate([f"{UUID_A}-2"]).container_responses[0]

    assert first.envs["NVIDIA_VISIBLE_DEVICES"] == f"{UUID_A},{UUID_B}"
    assert (first.envs["CUDA_DEVICE_MEMORY_LIMIT_0"], first.envs["CUDA_DEVICE_MEMORY_LIMIT_1"]) == (
        "2000m",
        "2000m",
    )
    assert after_first[TO_ALLOCATE] == f";;{UUID_A},NVIDIA,1000,10:;"
    assert after_first["hami.io/bind-phase"] == "allocating"
    assert second.envs["NVIDIA_VISIBLE_DEVICES"] == UUID_A
    assert second.envs["CUDA_DEVICE_SM_LIMIT"] == "10"
    # CUDA_DISABLE_CONTROL is not honoured outside trusted namespaces: the limiter stays
    assert "/etc/ld.so.preload" in [m.container_path for m in second.mounts]
    assert pod(env, "pipeline")["hami.io/bind-phase"] == "success"
    assert pod(env, "pipeline")[TO_ALLOCATE] == ";;;"
    assert LOCK not in env.node_annotations()


def events_about(env: PluginEnv, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in env.api.list_items("/api/v1/namespaces/default/events")
        if e["involvedObject"]["name"] == name
    ]


def test_a_tenants_own_grant_on_a_busy_card_is_refused(start_plugin: Start) -> None:
    """Issue 8 item 1: a pod placed by its owner with home-made annotations gets nothing."""
    env = start_plugin()
    schedule(
        env, "running", f"{UUID_A},NVIDIA,20000,0:;", [gpu_container("main")],
        bind_phase="success", lock=False,
    )  # fmt: skip
    forged = {
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "0",
        "hami.io/vgpu-node": NODE,
        TO_ALLOCATE: f"{UUID_A},NVIDIA,32768,100:;",
        "hami.io/vgpu-devices-allocated": f"{UUID_A},NVIDIA,32768,100:;",
    }
    manifest = pod_manifest(
        "default", "intruder", annotations=forged, labels={"hami.io/webhook": "ignore"},
        node_name=NODE, limits={"nvidia.com/gpu": 1},
    )  # fmt: skip
    created = env.api.create("/api/v1/namespaces/default/pods", manifest)
    env.kubelet.admit(created["metadata"]["uid"], ["main"])

    with pytest.raises(grpc.RpcError) as err:
        env.kubelet.allocate([f"{UUID_A}-0"])

    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "default/intruder" in err.value.details()
    assert "vgpu.io/grant-signature" in err.value.details()
    assert pod(env, "intruder")["hami.io/bind-phase"] == "failed"
    ((reason, message),) = events_about(env, "intruder")
    assert reason == "GPUAllocationFailed" and "grant-signature" in message
    assert not (env.hook / "vgpu" / "containers").exists()

    # a correctly signed pod that fits next to the running one is served
    schedule(env, "fits", f"{UUID_A},NVIDIA,12000,0:;", [gpu_container("main")])
    (served,) = env.kubelet.allocate([f"{UUID_A}-1"]).container_responses
    assert dict(served.envs)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "12000m"
    assert pod(env, "fits")["hami.io/bind-phase"] == "success"


def test_a_signed_grant_that_overfills_a_card_is_refused(start_plugin: Start) -> None:
    """Even a valid signature (a leaked key, a second scheduler) cannot overfill a card."""
    env = start_plugin()
    schedule(
        env, "running", f"{UUID_A},NVIDIA,20000,0:;", [gpu_container("main")],
        bind_phase="success", lock=False,
    )  # fmt: skip
    schedule(env, "second", f"{UUID_A},NVIDIA,20000,0:;", [gpu_container("main")])

    with pytest.raises(grpc.RpcError) as err:
        env.kubelet.allocate([f"{UUID_A}-0"])

    assert f"card {UUID_A} would be over capacity" in err.value.details()
    assert "container 'main'" in err.value.details()
    assert pod(env, "second")["hami.io/bind-phase"] == "failed"
    assert [r for r, _ in events_about(env, "second")] == ["GPUAllocationFailed"]
    assert LOCK not in env.node_annotations()


def test_a_key_added_to_the_secret_is_picked_up_for_the_next_grant(
    start_plugin: Start, tmp_path: Path
) -> None:
    config = tmp_path / "plugin.yaml"
    config.write_text("signing:\n  unknown_key_retry: 0.1\n")
    env = start_plugin("--config", str(config))
    schedule(env, "before", f"{UUID_A},NVIDIA,1000,0:;", [gpu_container("main")])
    env.kubelet.allocate([f"{UUID_A}-0"])  # the plugin has read the ring with one key

    rotated = KeyRing({**RING.keys, "2026-02": b"rotated-key-0123456789abcdef012345"})
    env.api.merge_patch(SECRET, {"data": key_secret_manifest(rotated)["data"]})
    time.sleep(0.2)  # past unknown_key_retry since the last read
    schedule(env, "after", f"{UUID_B},NVIDIA,1000,0:;", [gpu_container("main")], ring=rotated)
    (served,) = env.kubelet.allocate([f"{UUID_B}-0"]).container_responses

    assert dict(served.envs)["NVIDIA_VISIBLE_DEVICES"] == UUID_B
    assert pod(env, "after")["hami.io/bind-phase"] == "success"


def test_without_the_key_secret_nothing_is_served_and_no_pod_is_failed(
    start_plugin: Start,
) -> None:
    env = start_plugin()
    env.api.delete(SECRET)
    schedule(env, "train", f"{UUID_A},NVIDIA,1000,0:;", [gpu_container("main")])

    with pytest.raises(grpc.RpcError) as err:
        env.kubelet.allocate([f"{UUID_A}-0"])

    assert "cannot verify grants" in err.value.details()
    assert "vgpu-system/vgpu-grant-keys" in err.value.details()
    assert pod(env, "train")["hami.io/bind-phase"] == "allocating"
    assert events_about(env, "train") == []


def test_a_grant_for_a_card_the_node_lacks_is_refused_and_the_pod_marked_failed(
    start_plugin: Start,
) -> None:
    env = start_plugin()
    forged = "GPU-deadbeef-0000-0000-0000-000000000000"
    schedule(env, "intruder", f"{forged},NVIDIA,32768,100:;", [gpu_container("main")])

    with pytest.raises(grpc.RpcError) as err:
        env.kubelet.allocate([f"{UUID_A}-0"])

    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert forged in err.value.details() and f"not a GPU of node {NODE}" in err.value.details()
    assert pod(env, "intruder")["hami.io/bind-phase"] == "failed"
    assert LOCK not in env.node_annotations()
    assert not (env.hook / "vgpu" / "containers").exists()


def test_a_kubelet_restart_leads_to_a_second_registration(start_plugin: Start) -> None:
    env = start_plugin()
    assert env.kubelet.wait_for(lambda: len(env.kubelet.device_lists) == 1)
    # the kubelet records a registration before the plugin's Register call has returned
    assert env.wait_for_log("registered nvidia.com/gpu with the kubelet")

    env.kubelet.restart()

    assert env.kubelet.wait_for(lambda: len(env.kubelet.registrations) >= 2), env.log()
    assert env.kubelet.registrations[1].endpoint == "nvidia-gpu.sock"
    assert env.kubelet.wait_for(lambda: len(env.kubelet.device_lists) >= 2)
    assert env.kubelet.device_lists[1] == [(i, "Healthy") for i in replicas(UUID_A, UUID_B)]
    assert "the kubelet restarted" in env.log()


def test_a_health_change_is_streamed_and_registered(start_plugin: Start) -> None:
    env = start_plugin()
    assert env.kubelet.wait_for(lambda: bool(env.kubelet.device_lists))
    assert env.kubelet.wait_for(lambda: REGISTER in env.node_annotations())

    env.gpu_file.write_text(gpu_file_text(healthy_b=False))

    expected = [(i, "Healthy") for i in replicas(UUID_A)]
    expected += [(i, "Unhealthy") for i in replicas(UUID_B)]
    assert env.kubelet.wait_for(lambda: env.kubelet.device_lists[-1] == expected), env.log()
    # the node annotation follows at once, not at the next 30 s refresh
    assert env.kubelet.wait_for(
        lambda: '"health":true' not in env.node_annotations()[REGISTER].split(UUID_B)[1]
    )
    assert "Xid 79" in env.log()


def test_it_waits_for_a_missing_kubelet_and_registers_when_it_appears(
    plugin_env: PluginEnv,
) -> None:
    plugin_env.start()
    missing = f"kubelet socket {plugin_env.plugin_dir}/kubelet.sock does not exist"
    assert plugin_env.wait_for_log(missing), plugin_env.log()

    plugin_env.kubelet.start()

    assert plugin_env.kubelet.wait_for(lambda: bool(plugin_env.kubelet.registrations))


def test_sigterm_stops_it_cleanly_and_removes_its_socket(start_plugin: Start) -> None:
    env = start_plugin()
    (process,) = env.processes

    assert env.stop(process) == 0
    assert not (env.plugin_dir / "nvidia-gpu.sock").exists()
    assert "device plugin stopped" in env.log()


def test_bad_settings_exit_at_once_with_the_reason(plugin_env: PluginEnv) -> None:
    process = plugin_env.start("--split-count", "0")

    assert process.wait(timeout=30) == 2
    assert "split_count" in plugin_env.log() and "command line" in plugin_env.log()


def test_an_unreadable_gpu_inventory_stops_it_with_one_clear_line(plugin_env: PluginEnv) -> None:
    plugin_env.gpu_file.write_text("gpus:\n  - uuid: GPU-x\n    memory_mib: lots\n")
    process = plugin_env.start()

    assert process.wait(timeout=30) == 2
    log = plugin_env.log()
    assert f"vgpu device-plugin: cannot start: {plugin_env.gpu_file}: gpus[0]" in log
    assert "Traceback" not in log


def test_allocate_reads_its_watch_cache_of_this_node_not_the_api(start_plugin: Start) -> None:
    env = start_plugin()

    def watching(path: str) -> list[Any]:
        return [r for r in env.api.requests("GET", path) if r.params.get("watch")]

    assert env.kubelet.wait_for(lambda: bool(watching("/api/v1/pods")))
    assert env.kubelet.wait_for(lambda: bool(watching("/api/v1/nodes")))
    assert {r.params.get("fieldSelector") for r in watching("/api/v1/pods")} == {
        f"spec.nodeName={NODE}"
    }
    assert {r.params.get("fieldSelector") for r in watching("/api/v1/nodes")} == {
        f"metadata.name={NODE}"
    }

    def pod_reads() -> int:  # lists and gets, not the watch
        found = env.api.requests("GET", "/api/v1/pods")
        found += env.api.requests("GET", "/api/v1/namespaces/default/pods")
        return sum(1 for r in found if not r.params.get("watch"))

    before = pod_reads()

    for i in range(3):
        schedule(env, f"train-{i}", f"{UUID_A},NVIDIA,1000,0:;", [gpu_container("main")])
        env.kubelet.allocate([f"{UUID_A}-{i}"])

    assert pod_reads() == before
    assert pod(env, "train-2")["hami.io/bind-phase"] == "success"
