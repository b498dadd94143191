"""The real `vgpu scheduler` against a Kubernetes API emulator over real HTTP.

Each test plays kube-apiserver (AdmissionReview to /webhook, then it stores the mutated pod)
and kube-scheduler (/filter with `nodeCacheCapable: true`, then /bind), and reads the result
back from the API: HAMi's annotations, the Binding, the node lock.
"""

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest, quota_manifest
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import SchedulerProcess, wait_until

A40 = ("GPU-03f69c50-207a-2038-9b45-23cac89cb67d", "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae")
A40_REGISTER = "".join(f"{u},10,46068,100,NVIDIA-NVIDIA A40,0,true:" for u in A40)
NODES = "/api/v1/nodes"


def pods(namespace: str = "default") -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def start(launch: Launch, api: RunningApiServer, tmp_path: Path, **env: str) -> SchedulerProcess:
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    settings = {f"VGPU_{k.upper()}": v for k, v in env.items()}
    return launch("--kubeconfig", str(kubeconfig), env=settings)


def create_pod(
    api: RunningApiServer,
    scheduler: SchedulerProcess,
    name: str,
    namespace: str = "default",
    **limits: Any,
) -> dict[str, Any]:
    """What the API server does on `kubectl create`: ask the webhook, store the mutated pod."""
    resources = {f"nvidia.com/{k}": v for k, v in limits.items()}
    admitted = scheduler.admit(pod_manifest(namespace, name, limits=resources))
    return api.create(pods(namespace), admitted)


def annotations(api: RunningApiServer, name: str, namespace: str = "default") -> dict[str, str]:
    stored = api.get(f"{pods(namespace)}/{name}")
    assert stored is not None
    found: dict[str, str] = stored["metadata"].get("annotations") or {}
    return found


def release_lock_as_the_device_plugin_would(api: RunningApiServer, node: str) -> None:
    api.merge_patch(f"{NODES}/{node}", {"metadata": {"annotations": {"hami.io/mutex.lock": None}}})


def test_the_a40_example_end_to_end(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(
        NODES, node_manifest("node1", annotations={"hami.io/node-nvidia-register": A40_REGISTER})
    )
    scheduler = start(launch, k8s_api, tmp_path)
    pod = create_pod(k8s_api, scheduler, "gpu-pod", gpu=1, gpumem=20000, gpucores=80)
    assert pod["spec"]["schedulerName"] == "vgpu-scheduler"

    reply = scheduler.filter(pod, ["node1"])
    assert reply["NodeNames"] == ["node1"] and reply["Error"] == ""
    notes = annotations(k8s_api, "gpu-pod")
    assert notes["hami.io/vgpu-devices-allocated"] in [f"{u},NVIDIA,20000,80:;" for u in A40]
    assert notes["hami.io/vgpu-devices-to-allocate"] == notes["hami.io/vgpu-devices-allocated"]
    assert notes["hami.io/vgpu-node"] == "node1"
    assert notes["hami.io/vgpu-time"].isdigit()
    stored = k8s_api.get(f"{pods()}/gpu-pod")
    assert stored is not None and stored["metadata"]["labels"]["hami.io/vgpu-node"] == "node1"

    assert scheduler.bind(pod, "node1") == ""
    stored = k8s_api.get(f"{pods()}/gpu-pod")
    assert stored is not None and stored["spec"]["nodeName"] == "node1"
    assert annotations(k8s_api, "gpu-pod")["hami.io/bind-phase"] == "allocating"
    node = k8s_api.get(f"{NODES}/node1")
    assert node is not None
    assert node["metadata"]["annotations"]["hami.io/mutex.lock"].endswith(",default,gpu-pod")

    def reasons() -> set[str]:  # Events are written by a background worker, soon after
        events = k8s_api.get("/api/v1/namespaces/default/events") or {}
        return {e["reason"] for e in events.get("items") or []}

    assert wait_until(lambda: {"FilteringSucceed", "BindingSucceed"} <= reasons()), reasons()


def test_quota_blocks_the_second_pod(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(
        NODES, node_manifest("node1", annotations={"hami.io/node-nvidia-register": A40_REGISTER})
    )
    k8s_api.create(
        "/api/v1/namespaces/team/resourcequotas",
        quota_manifest("team", "gpu", {"limits.nvidia.com/gpumem": "30000"}),
    )
    scheduler = start(launch, k8s_api, tmp_path)
    first = create_pod(k8s_api, scheduler, "a", "team", gpu=1, gpumem=20000)
    assert scheduler.filter(first, ["node1"])["NodeNames"] == ["node1"]

    denied = scheduler.review(
        pod_manifest("team", "b", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000})
    )
    assert denied["allowed"] is False
    assert "exceeding resource quota" in denied["status"]["message"]
    # a pod that reached the scheduler anyway is not placed either
    second = k8s_api.create(
        pods("team"),
        pod_manifest(
            "team",
            "b",
            limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000},
            scheduler_name="vgpu-scheduler",
        ),
    )
    reply = scheduler.filter(second, ["node1"])
    assert reply["NodeNames"] is None
    assert "ResourceQuotaNotFit" in reply["FailedNodes"]["node1"]
    assert "hami.io/vgpu-devices-allocated" not in annotations(k8s_api, "b", "team")


def test_fifty_concurrent_filters_for_whole_cards_place_exactly_four(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    cards = "".join(f"GPU-big-{i},10,24000,100,NVIDIA-NVIDIA L4,0,true:" for i in range(4))
    k8s_api.create(NODES, node_manifest("big", annotations={"hami.io/node-nvidia-register": cards}))
    scheduler = start(launch, k8s_api, tmp_path)
    created = [create_pod(k8s_api, scheduler, f"p{i}", gpu=1) for i in range(50)]
    assert (
        created[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] == "100"
    )

    with ThreadPoolExecutor(max_workers=50) as pool:
        replies = list(pool.map(lambda p: scheduler.filter(p, ["big"]), created))

    placed = [r for r in replies if r["NodeNames"] == ["big"]]
    assert len(placed) == 4
    assert all(r["Error"] == "" for r in replies)
    granted = [
        annotations(k8s_api, f"p{i}").get("hami.io/vgpu-devices-allocated") for i in range(50)
    ]
    given = sorted(g for g in granted if g)
    assert given == [f"GPU-big-{i},NVIDIA,24000,100:;" for i in range(4)]
    assert sorted(scheduler.metric("hami_gpu_shared_count")) == [1, 1, 1, 1]


def test_a_restart_in_the_middle_rebuilds_the_same_usage(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(
        NODES, node_manifest("node1", annotations={"hami.io/node-nvidia-register": A40_REGISTER})
    )
    k8s_api.create(
        "/api/v1/namespaces/default/resourcequotas",
        quota_manifest("default", "gpu", {"limits.nvidia.com/gpumem": "80000"}),
    )
    scheduler = start(launch, k8s_api, tmp_path)
    bound = create_pod(k8s_api, scheduler, "bound", gpu=1, gpumem=30000, gpucores=50)
    assert scheduler.filter(bound, ["node1"])["NodeNames"] == ["node1"]
    assert scheduler.bind(bound, "node1") == ""
    release_lock_as_the_device_plugin_would(k8s_api, "node1")
    reserved = create_pod(k8s_api, scheduler, "reserved", gpu=1, gpumem=40000, gpucores=20)
    assert scheduler.filter(reserved, ["node1"])["NodeNames"] == ["node1"]
    before = sorted(scheduler.metric("hami_gpu_memory_allocated_bytes"))
    quota_before = scheduler.metric("hami_resource_quota_used", namespace="default")

    assert scheduler.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM when done
    assert "scheduler stopped" in scheduler.logs()
    scheduler.start()

    assert sorted(scheduler.metric("hami_gpu_memory_allocated_bytes")) == before
    assert before == [30000 * 2**20, 40000 * 2**20]
    assert scheduler.metric("hami_resource_quota_used", namespace="default") == quota_before
    # quota: 70000 of 80000 MiB in use again, so 2 x 10000 more is refused at admission
    denied = scheduler.review(
        pod_manifest("default", "late", limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 10000})
    )
    assert "exceeding resource quota" in denied["status"]["message"]
    # cards: 16068 and 6068 MiB left, so 20000 MiB fits on neither (it would on a fresh node)
    other = create_pod(k8s_api, scheduler, "other", "elsewhere", gpu=1, gpumem=20000)
    reply = scheduler.filter(other, ["node1"])
    assert reply["NodeNames"] is None
    assert "2/2 CardInsufficientMemory" in reply["FailedNodes"]["node1"]
    assert scheduler.bind(reserved, "node1") == ""  # the reservation survived the restart


def test_a_deleted_pod_frees_its_card(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    cards = "GPU-only-0,10,24000,100,NVIDIA-NVIDIA L4,0,true:"
    k8s_api.create(NODES, node_manifest("one", annotations={"hami.io/node-nvidia-register": cards}))
    scheduler = start(launch, k8s_api, tmp_path)
    first = create_pod(k8s_api, scheduler, "first", gpu=1)
    assert scheduler.filter(first, ["one"])["NodeNames"] == ["one"]
    assert scheduler.bind(first, "one") == ""
    second = create_pod(k8s_api, scheduler, "second", gpu=1)
    reply = scheduler.filter(second, ["one"])
    assert reply["NodeNames"] is None
    assert "CardInsufficientMemory" in reply["FailedNodes"]["one"]

    k8s_api.delete(f"{pods()}/first")

    assert wait_until(lambda: scheduler.metric("hami_gpu_shared_count") == [0])
    assert scheduler.filter(second, ["one"])["NodeNames"] == ["one"]


def test_prioritize_scores_every_candidate(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    for name in ("busy", "idle"):
        register = f"GPU-{name},10,24000,100,NVIDIA-NVIDIA L4,0,true:"
        k8s_api.create(
            NODES, node_manifest(name, annotations={"hami.io/node-nvidia-register": register})
        )
    k8s_api.create(NODES, node_manifest("cpu"))
    scheduler = start(launch, k8s_api, tmp_path, combine_scores="true")
    first = create_pod(k8s_api, scheduler, "first", gpu=1, gpumem=12000, gpucores=50)
    assert sorted(scheduler.filter(first, ["busy", "idle", "cpu"])["NodeNames"]) == ["busy", "idle"]
    assert scheduler.bind(first, "busy") == ""  # kube-scheduler's pick; cards placed at bind
    assert annotations(k8s_api, "first")["hami.io/vgpu-node"] == "busy"

    second = create_pod(k8s_api, scheduler, "second", gpu=1, gpumem=2000, gpucores=10)
    scores = {h["Host"]: h["Score"] for h in scheduler.prioritize(second, ["busy", "idle", "cpu"])}
    assert scores["busy"] > scores["idle"] and scores["cpu"] == 0
    assert "hami.io/vgpu-node" not in annotations(k8s_api, "second")


def test_two_replicas_elect_one_leader_and_only_it_schedules(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(
        NODES, node_manifest("node1", annotations={"hami.io/node-nvidia-register": A40_REGISTER})
    )
    kubeconfig = str(k8s_api.kubeconfig(tmp_path / "kubeconfig"))
    election = {
        "VGPU_LEADER_ELECTION__ENABLED": "true",
        "VGPU_LEADER_ELECTION__NAMESPACE": "default",
        "VGPU_LEADER_ELECTION__LEASE_DURATION": "4",
        "VGPU_LEADER_ELECTION__RENEW_DEADLINE": "3",
        "VGPU_LEADER_ELECTION__RETRY_PERIOD": "0.5",
    }
    a = launch(
        "--kubeconfig",
        kubeconfig,
        ready=False,
        name="a",
        env={**election, "VGPU_LEADER_ELECTION__IDENTITY": "replica-a"},
    )
    b = launch(
        "--kubeconfig",
        kubeconfig,
        ready=False,
        name="b",
        env={**election, "VGPU_LEADER_ELECTION__IDENTITY": "replica-b"},
    )
    assert wait_until(lambda: a.listening() and b.listening(), 30), a.logs() + b.logs()
    assert wait_until(lambda: a.ready() or b.ready(), 30), a.logs() + b.logs()
    leader, follower = (a, b) if a.ready() else (b, a)
    assert not follower.ready()
    # the follower may still be syncing its caches on a busy machine; then it says so first
    assert wait_until(
        lambda: follower.client.get("/readyz").text.startswith("not ready: not the leader"), 30
    ), follower.logs()
    pod = create_pod(k8s_api, leader, "p", gpu=1)
    assert "not the leader" in follower.filter(pod, ["node1"])["Error"]
    assert leader.filter(pod, ["node1"])["NodeNames"] == ["node1"]

    leader.stop()  # a leader that stops hands the Lease over
    assert wait_until(follower.ready, 30), follower.logs()
