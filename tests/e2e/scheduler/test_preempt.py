"""`POST /preempt` on a real `vgpu scheduler --fake-cluster` process, with the request shapes
kube-scheduler sends: victims as whole pods, or by UID when the extender is nodeCacheCapable."""

import json
from pathlib import Path
from typing import Any

from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import SchedulerProcess

BIG = ("GPU-03f69c50-207a-2038-9b45-23cac89cb67d", "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae")
SMALL = "GPU-5cc1a3e4-8b1e-4c3e-9a55-4a8c7a1b2c3d"
NODES = {
    "nodes": [
        {
            "name": "node1",
            "gpus": [{"uuid": u, "type": "NVIDIA A40", "memory": 46068} for u in BIG],
        },
        {"name": "node2", "gpus": [{"uuid": SMALL, "type": "NVIDIA T4", "memory": 15360}]},
    ]
}


def pod(name: str, priority: int, memory: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "priority": priority,
            "containers": [
                {
                    "name": "main",
                    "image": "cuda:12",
                    "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": memory}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def running(name: str, priority: int, memory: int, node: str, card: str) -> dict[str, Any]:
    """A pod bound earlier, with the grant annotations the scheduler wrote then."""
    manifest = pod(name, priority, memory)
    manifest["metadata"]["annotations"] = {
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-devices-allocated": f"{card},NVIDIA,{memory},0:;",
    }
    manifest["spec"]["nodeName"] = node
    manifest["status"]["phase"] = "Running"
    return manifest


RUNNING = [
    running("train-a", 10, 40000, "node1", BIG[0]),
    running("train-b", 5, 40000, "node1", BIG[1]),
    running("notebook", 1, 3000, "node1", BIG[0]),
    running("t4-job", 1, 15000, "node2", SMALL),
]


def preempt(scheduler: SchedulerProcess, body: dict[str, Any]) -> Any:
    response = scheduler.extender.post("/preempt", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def start(tmp_path: Path, launch: Launch) -> SchedulerProcess:
    path = tmp_path / "cluster.yaml"
    path.write_text(json.dumps({**NODES, "pods": RUNNING}))
    return launch("--fake-cluster", str(path))


def test_victims_as_pods_the_cheapest_one_is_kept_and_a_hopeless_node_dropped(
    tmp_path: Path, launch: Launch
) -> None:
    scheduler = start(tmp_path, launch)
    train_a, train_b, notebook, t4_job = RUNNING
    urgent = scheduler.admit(pod("urgent", 1000, 30000))
    assert scheduler.filter(urgent, ["node1", "node2"])["NodeNames"] is None
    reply = preempt(
        scheduler,
        {
            "Pod": urgent,
            "NodeNameToVictims": {
                "node1": {"Pods": [train_a, train_b, notebook], "NumPDBViolations": 1},
                "node2": {"Pods": [t4_job], "NumPDBViolations": 0},
            },
            "NodeNameToMetaVictims": None,
        },
    )
    # One trainer must go (either frees 30000 MiB on its card); train-b has the lower
    # priority. No victim on node2 helps: its T4 is too small for 30000 MiB.
    assert reply == {
        "NodeNameToMetaVictims": {
            "node1": {"Pods": [{"UID": "uid-train-b"}], "NumPDBViolations": 1}
        }
    }


def test_victims_by_uid_when_node_cache_capable(tmp_path: Path, launch: Launch) -> None:
    scheduler = start(tmp_path, launch)
    urgent = scheduler.admit(pod("urgent", 1000, 44000))
    reply = preempt(
        scheduler,
        {
            "Pod": urgent,
            "NodeNameToMetaVictims": {
                "node1": {
                    "Pods": [
                        {"UID": "uid-train-a"},
                        {"UID": "uid-train-b"},
                        {"UID": "uid-notebook"},
                    ],
                    "NumPDBViolations": 0,
                }
            },
        },
    )
    # 44000 MiB needs almost a whole card: train-a shares its card with the notebook, so
    # evicting train-a alone is not enough; train-b, alone on its card, is.
    assert reply == {
        "NodeNameToMetaVictims": {
            "node1": {"Pods": [{"UID": "uid-train-b"}], "NumPDBViolations": 0}
        }
    }
    assert scheduler.metric("vgpu_scheduler_requests_total", verb="preempt", outcome="kept") == [1]


def test_a_victim_of_higher_priority_is_never_chosen(tmp_path: Path, launch: Launch) -> None:
    scheduler = start(tmp_path, launch)
    train_a, train_b, notebook, _ = RUNNING
    modest = scheduler.admit(pod("modest", 3, 30000))
    reply = preempt(
        scheduler,
        {"Pod": modest, "NodeNameToVictims": {"node1": {"Pods": [train_a, train_b, notebook]}}},
    )
    assert reply == {"NodeNameToMetaVictims": {}}


def test_a_malformed_request_is_an_error_naming_the_field(tmp_path: Path, launch: Launch) -> None:
    scheduler = start(tmp_path, launch)
    response = scheduler.extender.post(
        "/preempt",
        json={"Pod": pod("x", 1, 1000), "NodeNameToMetaVictims": {"node1": {"Pods": [{}]}}},
    )
    assert response.status_code == 400
    assert "UID" in response.json()["Error"]
