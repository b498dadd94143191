"""Dynamic MIG through the real extender: a `vgpu scheduler` process, the Kubernetes API
emulator, a node registered in MIG mode with its profiles (HAMi v2.10's register format)."""

import json
from pathlib import Path
from typing import Any

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import SchedulerProcess

CARD = "GPU-7c3a9a52-55a4-4a0b-8f4e-6b0b1c7a1b01"


def _profile(name: str, slices: int, memory: int, core: int, starts: list[int], size: int) -> Any:
    placements = [{"start": s, "size": size} for s in starts]
    return {
        "name": name,
        "memoryMB": memory,
        "core": core,
        "sliceCount": slices,
        "placements": placements,
    }


REGISTER = json.dumps(
    [
        {
            "id": CARD,
            "count": 7,
            "devmem": 81920,
            "devcore": 100,
            "type": "NVIDIA A100-SXM4-80GB",
            "mode": "mig",
            "migProfiles": [
                _profile("1g.10gb", 1, 9856, 15, list(range(7)), 1),
                _profile("2g.20gb", 2, 19968, 29, [0, 2, 4], 2),
                _profile("3g.40gb", 3, 40192, 43, [0, 4], 4),
                _profile("7g.80gb", 7, 80896, 100, [0], 8),
            ],
            "health": True,
        }
    ],
    separators=(",", ":"),
)


def _mig_pod(
    api: RunningApiServer, scheduler: SchedulerProcess, name: str, memory: int, devices: int = 1
) -> Any:
    body = pod_manifest(
        "default",
        name,
        limits={"nvidia.com/gpu": devices, "nvidia.com/gpumem": memory},
        annotations={"nvidia.com/vgpu-mode": "mig"},
    )
    return api.create("/api/v1/namespaces/default/pods", scheduler.admit(body))


def _reservations(api: RunningApiServer, name: str) -> list[dict[str, Any]]:
    stored = api.get(f"/api/v1/namespaces/default/pods/{name}")
    assert stored is not None
    notes = stored["metadata"]["annotations"]
    assert notes["hami.io/vgpu-devices-allocated"] == f"{CARD},NVIDIA,40192,43:;"
    found: list[dict[str, Any]] = json.loads(notes["hami.io/vgpu-mig-allocations"])
    return found


def _scheduler_with_mig_node(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> SchedulerProcess:
    k8s_api.create(
        "/api/v1/nodes",
        node_manifest("a100", annotations={"hami.io/node-nvidia-register": REGISTER}),
    )
    return launch("--kubeconfig", str(k8s_api.kubeconfig(tmp_path / "kubeconfig")))


def test_two_instances_share_a_card_at_different_placements_and_a_third_is_refused(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    scheduler = _scheduler_with_mig_node(k8s_api, launch, tmp_path)
    first = _mig_pod(k8s_api, scheduler, "first", 30000)
    second = _mig_pod(k8s_api, scheduler, "second", 30000)
    assert scheduler.filter(first, ["a100"])["NodeNames"] == ["a100"]
    assert scheduler.filter(second, ["a100"])["NodeNames"] == ["a100"]
    assert _reservations(k8s_api, "first") == [
        {
            "containerIndex": 0,
            "deviceIndex": 0,
            "gpuUUID": CARD,
            "profile": "3g.40gb",
            "placement": {"start": 4, "size": 4},
        }
    ]
    assert _reservations(k8s_api, "second")[0]["placement"] == {"start": 0, "size": 4}

    third = _mig_pod(k8s_api, scheduler, "third", 1000)  # 1536 MiB are free, no slice is
    reply = scheduler.filter(third, ["a100"])
    assert reply["NodeNames"] is None
    assert "1/1 CardMigTopologyInfeasible" in reply["FailedNodes"]["a100"]

    scheduler.stop()  # the occupied slices come back from the pods' annotations
    scheduler.start()
    again = scheduler.filter(third, ["a100"])
    assert "1/1 CardMigTopologyInfeasible" in again["FailedNodes"]["a100"]


def test_a_container_asking_two_devices_gets_two_placements_on_the_one_card(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    scheduler = _scheduler_with_mig_node(k8s_api, launch, tmp_path)
    pair = _mig_pod(k8s_api, scheduler, "pair", 12000, devices=2)
    assert scheduler.filter(pair, ["a100"])["NodeNames"] == ["a100"]

    stored = k8s_api.get("/api/v1/namespaces/default/pods/pair")
    assert stored is not None
    notes = stored["metadata"]["annotations"]
    assert notes["hami.io/vgpu-devices-allocated"] == f"{CARD},NVIDIA,19968,29:" * 2 + ";"
    reserved = json.loads(notes["hami.io/vgpu-mig-allocations"])
    assert [(r["deviceIndex"], r["gpuUUID"], r["profile"], r["placement"]) for r in reserved] == [
        (0, CARD, "2g.20gb", {"start": 0, "size": 2}),
        (1, CARD, "2g.20gb", {"start": 2, "size": 2}),
    ]

    scheduler.stop()  # both instances come back from the annotations: 2g.20gb has one left
    scheduler.start()
    third = _mig_pod(k8s_api, scheduler, "third", 12000, devices=2)
    reply = scheduler.filter(third, ["a100"])
    assert reply["NodeNames"] is None
    assert "AllocatedCardsInsufficientRequest" in reply["FailedNodes"]["a100"]
