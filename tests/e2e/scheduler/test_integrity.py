"""Allocation integrity against the API emulator with a real scheduler process (issue 8).

Forged grants do not charge the ledger, a Binding that commits but times out keeps its cards,
a failed bind takes its grant off the pod so a restart cannot resurrect it, and a leader whose
Lease calls hang stops scheduling at its renew deadline.
"""

from pathlib import Path

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import SchedulerProcess, wait_until
from tests.e2e.scheduler.test_kubernetes import (
    A40,
    A40_REGISTER,
    NODES,
    annotations,
    create_pod,
    pods,
    release_lock_as_the_device_plugin_would,
    start,
)

FULL_CARD = 46068
GRANT_KEYS = {
    "hami.io/vgpu-node",
    "hami.io/vgpu-time",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-devices-allocated",
    "vgpu.io/grant-signature",
}


def a40_node(api: RunningApiServer, name: str = "node1") -> None:
    api.create(
        NODES, node_manifest(name, annotations={"hami.io/node-nvidia-register": A40_REGISTER})
    )


def held(scheduler: SchedulerProcess) -> dict[str, float]:
    """The ledger as the scheduler exports it: MiB each pod holds, summed over its cards."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    for family in text_string_to_metric_families(scheduler.scrape.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "hami_vgpu_memory_allocated_bytes":
                key = f"{sample.labels['namespace']}/{sample.labels['pod']}"
                found[key] = found.get(key, 0) + sample.value / (1 << 20)
    return found


def test_a_forged_grant_on_a_pod_without_gpus_does_not_block_real_pods(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    a40_node(k8s_api)
    forged = {
        "hami.io/vgpu-node": "node1",
        "hami.io/vgpu-time": "1750000000",
        "hami.io/vgpu-devices-allocated": f"{A40[0]},NVIDIA,{FULL_CARD},100:;",
        "hami.io/vgpu-devices-to-allocate": f"{A40[0]},NVIDIA,{FULL_CARD},100:;",
        "vgpu.io/grant-signature": "k20260101t0000:Zm9yZ2Vk",
    }
    for name, node in (("squatter", "node1"), ("elsewhere", "node2")):
        k8s_api.create(
            pods("tenant"),
            pod_manifest("tenant", name, annotations=forged, node_name=node, phase="Running"),
        )
    scheduler = start(launch, k8s_api, tmp_path)
    assert held(scheduler) == {}
    placed = [create_pod(k8s_api, scheduler, f"real-{i}", gpu=1, gpumem=FULL_CARD) for i in (0, 1)]
    for pod in placed:
        assert scheduler.filter(pod, ["node1"])["NodeNames"] == ["node1"]
    assert held(scheduler) == {"default/real-0": FULL_CARD, "default/real-1": FULL_CARD}
    assert "does not verify" in scheduler.logs()


def test_a_binding_that_commits_but_times_out_keeps_its_card(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    a40_node(k8s_api)
    scheduler = start(launch, k8s_api, tmp_path, api_request_timeout="1")
    first = create_pod(k8s_api, scheduler, "first", gpu=1, gpumem=FULL_CARD)
    assert scheduler.filter(first, ["node1"])["NodeNames"] == ["node1"]
    k8s_api.delay("POST", "/binding", 5)  # the Binding is stored, its answer comes too late
    assert scheduler.bind(first, "node1") == ""
    k8s_api.end_delays()
    assert (
        "the Binding failed" in scheduler.logs() and "but it is bound to node1" in scheduler.logs()
    )
    stored = k8s_api.get(f"{pods()}/first")
    assert stored is not None and stored["spec"]["nodeName"] == "node1"
    release_lock_as_the_device_plugin_would(k8s_api, "node1")

    second = create_pod(k8s_api, scheduler, "second", gpu=1, gpumem=FULL_CARD)
    third = create_pod(k8s_api, scheduler, "third", gpu=1, gpumem=FULL_CARD)
    assert scheduler.filter(second, ["node1"])["NodeNames"] == ["node1"]
    assert scheduler.filter(third, ["node1"])["NodeNames"] is None  # both cards are taken
    cards = {
        annotations(k8s_api, n)["hami.io/vgpu-devices-allocated"][:40] for n in ("first", "second")
    }
    assert cards == set(A40)
    assert held(scheduler) == {"default/first": FULL_CARD, "default/second": FULL_CARD}


def test_a_failed_bind_is_revoked_in_the_api_and_a_restart_rebuilds_the_same_ledger(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    a40_node(k8s_api)
    scheduler = start(launch, k8s_api, tmp_path)
    kept = create_pod(k8s_api, scheduler, "kept", gpu=1, gpumem=20000)
    assert scheduler.filter(kept, ["node1"])["NodeNames"] == ["node1"]
    assert scheduler.bind(kept, "node1") == ""
    release_lock_as_the_device_plugin_would(k8s_api, "node1")
    waiting = create_pod(k8s_api, scheduler, "waiting", gpu=2, gpumem=1000)
    assert scheduler.filter(waiting, ["node1"])["NodeNames"] == ["node1"]
    refused = create_pod(k8s_api, scheduler, "refused", gpu=1, gpumem=20000)
    assert scheduler.filter(refused, ["node1"])["NodeNames"] == ["node1"]
    k8s_api.emulator[f"post {pods()}/refused/binding"] << 422
    assert "failed" in scheduler.bind(refused, "node1")
    assert not GRANT_KEYS & annotations(k8s_api, "refused").keys()  # revoked durably
    before = held(scheduler)
    assert set(before) == {"default/kept", "default/waiting"}

    scheduler.stop()
    scheduler.start()
    assert held(scheduler) == before
    standby_view = start(launch, k8s_api, tmp_path)  # a second process reading the same API
    assert held(standby_view) == before


def test_a_leader_whose_lease_calls_hang_stops_scheduling_at_its_renew_deadline(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    a40_node(k8s_api)
    scheduler = start(
        launch,
        k8s_api,
        tmp_path,
        leader_election__enabled="true",
        leader_election__namespace="default",
        leader_election__lease_duration="4",
        leader_election__renew_deadline="2",
        leader_election__retry_period="0.5",
    )
    pod = create_pod(k8s_api, scheduler, "p", gpu=1, gpumem=1000)
    k8s_api.delay("GET", "/leases/", 60)  # the API stops answering Lease calls
    k8s_api.delay("PUT", "/leases/", 60)
    assert wait_until(lambda: not scheduler.ready(), 10)
    assert "not the leader" in scheduler.client.get("/readyz").text
    assert "not the leader" in scheduler.filter(pod, ["node1"])["Error"]
    assert "hami.io/vgpu-devices-allocated" not in annotations(k8s_api, "p")
    k8s_api.end_delays()
    assert wait_until(scheduler.ready, 15)  # renewals answer again: it leads again
    assert scheduler.filter(pod, ["node1"])["NodeNames"] == ["node1"]
