"""Dynamic MIG through the real plugin process (docs/protocol.md#mig-instance-lifecycle): a fake A100 in MIG mode,
the kubelet's Allocate makes the instance the scheduler reserved, and deleting the pod
destroys it again."""

import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tests.e2e.device_plugin.harness import NODE, RING, PluginEnv
from tests.e2e.k8s_emulator import pod_manifest
from vgpu.domain.nodelock import NodeLock
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, grant_claim
from vgpu.domain.vendor import NVIDIA

MIG_GPU = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
MIG_ALLOCATIONS = "hami.io/vgpu-mig-allocations"
Start = Callable[..., PluginEnv]

GPU_FILE = f"""\
gpus:
  - uuid: {MIG_GPU}
    name: NVIDIA A100-SXM4-40GB
    memory_mib: 40960
    mig: true
    mig_profiles:
      - {{name: 1g.5gb, slices: 1, memory_mib: 4864, core: 15, instances: 7,
         placements: [{{start: 0, size: 1}}, {{start: 1, size: 1}}, {{start: 2, size: 1}}]}}
      - {{name: 3g.20gb, slices: 3, memory_mib: 19968, core: 43, instances: 2,
         placements: [{{start: 0, size: 4}}, {{start: 4, size: 4}}]}}
"""


# as the chart renders it: 1g.5gb is not allowed, and the fake offers no 7g profile
ALLOWLIST = """\
mig_profile_allowlist:
  - {models: ["A30"], profiles: ["1g.6gb"]}
  - {models: ["A100-SXM4-40GB"], profiles: ["3g.20gb", "7g.40gb"]}
"""


def schedule_mig(env: PluginEnv, name: str, profile: str, *placements: tuple[int, int]) -> None:
    """Leave a pod as vgpu's scheduler does after placing its container's MIG devices, one per
    (start, size), all on MIG_GPU (signed, locked)."""
    uid = str(uuid.uuid4())
    grants = f"{MIG_GPU},NVIDIA,19968,43:" * len(placements) + ";"
    reservation = [
        {
            "containerIndex": 0,
            "deviceIndex": device,
            "gpuUUID": MIG_GPU,
            "profile": profile,
            "placement": {"start": start, "size": size},
        }
        for device, (start, size) in enumerate(placements)
    ]
    annotations = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-time": "1700000000",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        NVIDIA.to_allocate_annotation: grants,
        NVIDIA.allocated_annotation: grants,
        MIG_ALLOCATIONS: json.dumps(reservation, separators=(",", ":")),
    }
    claim = grant_claim(uid, annotations, NVIDIA)
    assert claim is not None
    annotations[GRANT_SIGNATURE_ANNOTATION] = RING.sign(claim)
    container: dict[str, Any] = {
        "name": "main",
        "image": "cuda",
        "resources": {"limits": {"nvidia.com/gpu": len(placements)}},
    }
    manifest = pod_manifest(
        "default",
        name,
        annotations=annotations,
        node_name=NODE,
        scheduler_name="vgpu-scheduler",
        containers=[container],
    )
    manifest["metadata"]["uid"] = uid
    env.api.create("/api/v1/namespaces/default/pods", manifest)
    env.kubelet.admit(uid, ["main"])
    lock = NodeLock(datetime.now(UTC), "default", name).encode()
    env.api.merge_patch(f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": {
        "hami.io/mutex.lock": lock
    }}})  # fmt: skip


def reservations(env: PluginEnv, name: str) -> list[dict[str, Any]]:
    found = env.api.get(f"/api/v1/namespaces/default/pods/{name}") or {}
    text = (found.get("metadata", {}).get("annotations") or {}).get(MIG_ALLOCATIONS, "")
    parsed: list[dict[str, Any]] = json.loads(text)
    return parsed


def start_mig_plugin(plugin_env: PluginEnv, start_plugin: Start) -> PluginEnv:
    plugin_env.gpu_file.write_text(GPU_FILE)
    plugin_env.extra_env["VGPU_MIG_RECONCILE_INTERVAL"] = "0.2"
    config = plugin_env.gpu_file.with_name("plugin.yaml")
    config.write_text(ALLOWLIST)
    return start_plugin("--config", str(config))


def test_allocate_makes_the_reserved_instance_and_pod_deletion_destroys_it(
    plugin_env: PluginEnv, start_plugin: Start
) -> None:
    env = start_mig_plugin(plugin_env, start_plugin)
    assert env.kubelet.wait_for(lambda: "hami.io/node-nvidia-register" in env.node_annotations())
    (card,) = json.loads(env.node_annotations()["hami.io/node-nvidia-register"])
    assert (card["mode"], [p["name"] for p in card["migProfiles"]]) == (
        "mig",
        ["3g.20gb"],
    )

    schedule_mig(env, "train", "3g.20gb", (0, 4))
    reply = env.kubelet.allocate([f"{MIG_GPU}-0"])

    (answer,) = reply.container_responses
    mig_uuid = dict(answer.envs)["NVIDIA_VISIBLE_DEVICES"]
    assert re.fullmatch(r"MIG-\S+", mig_uuid)
    assert list(answer.mounts) == []
    (recorded,) = reservations(env, "train")
    assert recorded["migUUID"] == mig_uuid
    assert {"gpuInstanceID", "computeInstanceID"} <= set(recorded)
    assert f"MIG instance {mig_uuid} created for pod default/train" in env.log()

    env.api.delete("/api/v1/namespaces/default/pods/train")

    assert env.wait_for_log(f"MIG instance {mig_uuid} of pod default/train destroyed")
    # the slices are free again: the same placement can be made for the next pod
    schedule_mig(env, "next", "3g.20gb", (0, 4))
    env.kubelet.allocate([f"{MIG_GPU}-1"])
    (second,) = reservations(env, "next")
    assert second["migUUID"] != mig_uuid


def test_one_container_gets_two_instances_of_one_gpu_and_loses_both_with_the_pod(
    plugin_env: PluginEnv, start_plugin: Start
) -> None:
    env = start_mig_plugin(plugin_env, start_plugin)
    assert env.kubelet.wait_for(lambda: "hami.io/node-nvidia-register" in env.node_annotations())

    schedule_mig(env, "pair", "3g.20gb", (4, 4), (0, 4))
    reply = env.kubelet.allocate([f"{MIG_GPU}-0", f"{MIG_GPU}-1"])

    (answer,) = reply.container_responses
    visible = dict(answer.envs)["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(visible) == 2 and len(set(visible)) == 2
    recorded = reservations(env, "pair")
    assert [(r["placement"]["start"], r["migUUID"]) for r in recorded] == [
        (4, visible[0]),
        (0, visible[1]),
    ]

    env.api.delete("/api/v1/namespaces/default/pods/pair")

    for mig_uuid in visible:
        assert env.wait_for_log(f"MIG instance {mig_uuid} of pod default/pair destroyed")
