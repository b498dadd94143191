"""Filter: choose a node and cards, reserve them before answering, write HAMi's annotations."""

from concurrent.futures import ThreadPoolExecutor

from tests.unit.scheduler.builders import (
    A40_UUIDS,
    START,
    a40_node,
    gpu_node,
    manifest,
    signed,
    world,
)
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import NVIDIA, ClusterNode, Usage
from vgpu.ports.cluster import ClusterError


def test_the_seeds_a40_example_places_20000_mib_and_80_cores_on_one_card() -> None:
    w = world(a40_node("node1"))
    result = w.filter(manifest("gpu-pod", gpu=1, gpumem=20000, gpucores=80), "node1")
    assert result.error == ""
    assert result.node_names == ["node1"]
    notes = w.pod_annotations("gpu-pod")
    allocated = notes["hami.io/vgpu-devices-allocated"]
    assert allocated in (f"{uuid},NVIDIA,20000,80:;" for uuid in A40_UUIDS)
    assert notes["hami.io/vgpu-devices-to-allocate"] == allocated
    assert notes["hami.io/vgpu-node"] == "node1"
    assert notes["hami.io/vgpu-time"] == str(int(START))
    pod = w.cluster.get_pod("default", "gpu-pod")
    assert pod is not None and pod.labels["hami.io/vgpu-node"] == "node1"
    uuid = allocated.split(",")[0]
    assert w.usage("node1", uuid) == Usage(slices=1, memory=20000, cores=80)
    assert ("default", "gpu-pod", "FilteringSucceed") in [e[:3] for e in w.cluster.events]


def test_the_grant_is_reserved_so_the_next_pod_sees_the_card_taken() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("a", gpu=1, gpumem=40000, gpucores=10), "node1")
    w.filter(manifest("b", gpu=1, gpumem=40000, gpucores=10), "node1")
    third = w.filter(manifest("c", gpu=1, gpumem=40000, gpucores=10), "node1")
    first = w.pod_annotations("a")["hami.io/vgpu-devices-allocated"].split(",")[0]
    second = w.pod_annotations("b")["hami.io/vgpu-devices-allocated"].split(",")[0]
    assert {first, second} == set(A40_UUIDS)
    assert third.node_names is None
    assert "CardInsufficientMemory" in third.failed["node1"]
    assert "insufficient memory" in third.failed["node1"]


def test_fifty_concurrent_filters_for_whole_cards_place_exactly_four() -> None:
    w = world(gpu_node("big", cards=4))
    bodies = [manifest(f"p{i}", gpu=1) for i in range(50)]
    for body in bodies:
        w.add_pod(body)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda b: w.service.filter(b, ["big"], None), bodies))
    placed = [r for r in results if r.node_names == ["big"]]
    assert len(placed) == 4
    assert all(r.error == "" for r in results)
    cards = {w.pod_annotations(f"p{i}").get("hami.io/vgpu-devices-allocated") for i in range(50)}
    cards.discard(None)
    assert len(cards) == 4  # four different cards, each taken whole
    for i in range(4):
        assert w.usage("big", f"GPU-big-{i}").memory == 24000


def test_quota_blocks_the_second_pod_at_filter() -> None:
    from vgpu.ports.cluster import Quota

    w = world(a40_node("node1"))
    w.cluster.put_quota(Quota("team", "gpu", {"limits.nvidia.com/gpumem": "30000"}))
    first = w.filter(manifest("a", "team", gpu=1, gpumem=20000), "node1")
    second = w.filter(manifest("b", "team", gpu=1, gpumem=20000), "node1")
    assert first.node_names == ["node1"]
    assert second.node_names is None
    assert "ResourceQuotaNotFit" in second.failed["node1"]
    other = w.filter(manifest("c", "elsewhere", gpu=1, gpumem=20000), "node1")
    assert other.node_names == ["node1"]


def test_a_pod_without_gpu_requests_gets_the_candidates_back_unchanged() -> None:
    w = world(a40_node("node1"))
    result = w.filter(manifest("web", cpu="1"), "node1", "cpu-node")
    assert result.node_names == ["node1", "cpu-node"]
    assert result.error == "" and result.failed == {}
    assert w.cluster.events == []


def test_the_best_node_wins_and_the_answer_names_it_alone() -> None:
    # as HAMi answers: one node; the others are not fitted once the best is certain
    w = world(a40_node("node1"), gpu_node("small", cards=1, memory=8000), ClusterNode("cpu"))
    result = w.filter(manifest("p", gpu=1, gpumem=20000), "small", "node1", "cpu", "ghost")
    assert result.node_names == ["node1"]
    assert result.failed == {}


def test_a_pod_that_fits_nowhere_gets_a_reason_for_each_node() -> None:
    w = world(a40_node("node1"), gpu_node("small", cards=1, memory=8000), ClusterNode("cpu"))
    result = w.filter(manifest("p", gpu=1, gpumem=60000), "small", "node1", "cpu", "ghost")
    assert result.node_names is None
    assert set(result.failed) == {"small", "node1", "cpu", "ghost"}
    assert "insufficient memory" in result.failed["small"]
    assert "NodeUnregistered" in result.failed["cpu"]


def test_binpack_fills_the_busier_node_and_spread_the_idler_one() -> None:
    w = world(gpu_node("a", cards=1), gpu_node("b", cards=1))
    w.filter(manifest("first", gpu=1, gpumem=1000, gpucores=10), "a")
    packed = w.filter(manifest("packed", gpu=1, gpumem=1000, gpucores=10), "a", "b")
    spread = w.filter(
        manifest(
            "spread",
            annotations={"hami.io/node-scheduler-policy": "spread"},
            gpu=1,
            gpumem=1000,
            gpucores=10,
        ),
        "a",
        "b",
    )
    assert packed.node_names == ["a"]
    assert spread.node_names == ["b"]


def test_no_node_fits_records_filtering_failed_with_the_human_reason() -> None:
    w = world(a40_node("node1"))
    result = w.filter(manifest("huge", gpu=1, gpumem=100000), "node1")
    assert result.node_names is None and result.error == ""
    events = [e for e in w.cluster.events if e[2] == "FilteringFailed"]
    assert len(events) == 1
    message = events[0][3]
    assert message.startswith("0/1 nodes are available: 1 insufficient memory")
    assert "need 100000 MiB" in message
    assert events[0][4] is True  # a warning


def test_a_pod_refused_by_many_nodes_lists_every_node_in_the_reply_and_the_first_in_its_event() -> (
    None
):
    names = [f"node{i:02d}" for i in range(40)]
    w = world(*(a40_node(n) for n in names))
    result = w.filter(manifest("huge", gpu=1, gpumem=100000), *names)
    assert sorted(result.failed) == names
    [event] = [e for e in w.cluster.events if e[2] == "FilteringFailed"]
    message = event[3]
    assert len(message) <= 1000 and message.startswith("0/40 nodes are available")
    assert "node00: " in message and "node39: " not in message
    listed = sum(f"{n}: " in message for n in names)
    assert message.endswith(f"; and {40 - listed} more nodes")


def test_a_node_with_a_malformed_register_annotation_is_unusable_and_says_why() -> None:
    broken = ClusterNode("broken", {NVIDIA.register_annotation: "[{not json"})
    w = world(broken, a40_node("node1"))
    result = w.filter(manifest("p", gpu=1), "broken", "node1")
    assert result.node_names == ["node1"]
    assert "hami.io/node-nvidia-register" in result.failed["broken"]
    assert "invalid JSON" in result.failed["broken"]
    # fixed annotation: usable again
    w.cluster.put_node(a40_node("broken"))
    assert w.state.node_problem("broken") is None


def test_cordoned_cards_are_skipped() -> None:
    node = a40_node("node1")
    node = ClusterNode("node1", {**node.annotations, "hami.io/device-cordon": f" {A40_UUIDS[0]} "})
    w = world(node)
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert w.pod_annotations("p")["hami.io/vgpu-devices-allocated"].startswith(A40_UUIDS[1])


def test_a_bad_quantity_is_an_error_naming_the_resource_and_changes_nothing() -> None:
    w = world(a40_node("node1"))
    result = w.filter(manifest("p", gpu=1, gpumem="lots"), "node1")
    assert "nvidia.com/gpumem" in result.error and "'lots'" in result.error
    assert w.state.ledger.pods() == []
    assert w.pod_annotations("p") == {}


def test_an_unknown_policy_annotation_is_an_error() -> None:
    w = world(a40_node("node1"))
    body = manifest("p", annotations={"hami.io/gpu-scheduler-policy": "random"}, gpu=1)
    result = w.filter(body, "node1")
    assert "hami.io/gpu-scheduler-policy='random'" in result.error


class FailingPatches(FakeCluster):
    def patch_pod_annotations(
        self, namespace, name, annotations, labels=None, resource_version=None
    ):  # type: ignore[no-untyped-def]
        raise ClusterError("the API server said 500")


def test_a_failed_annotation_patch_rolls_the_reservation_back() -> None:
    w = world(a40_node("node1"), cluster=FailingPatches())
    result = w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert "the API server said 500" in result.error
    assert w.state.ledger.pods() == []
    assert w.state.reservation("default/p") is None
    assert w.state.quota.used("default") == Usage()


def test_filtering_the_same_pod_again_replaces_its_reservation() -> None:
    w = world(a40_node("node1"))
    body = manifest("p", gpu=2, gpumem=40000)
    assert w.filter(body, "node1").node_names == ["node1"]
    again = w.filter(body, "node1")  # would not fit if its first grant still counted
    assert again.node_names == ["node1"]
    assert len(w.state.ledger.pods()) == 1
    assert w.usage("node1", A40_UUIDS[0]).memory == 40000


def test_the_filter_refuses_to_schedule_before_the_state_is_synced() -> None:
    w = world(a40_node("node1"))
    w.state._synced.clear()
    result = w.filter(manifest("p", gpu=1), "node1")
    assert "still reading the cluster" in result.error


def test_an_autoscaler_simulation_is_answered_from_the_nodes_given_without_writing() -> None:
    w = world()
    template = {
        "metadata": {
            "name": "template-node",
            "annotations": {
                NVIDIA.register_annotation: a40_node().annotations[NVIDIA.register_annotation]
            },
        }
    }
    cpu_only = {"metadata": {"name": "cpu-template"}}
    w.add_pod(manifest("p", gpu=1, gpumem=20000))
    result = w.service.filter(manifest("p", gpu=1, gpumem=20000), None, [cpu_only, template])
    assert result.nodes == [template]
    assert result.node_names is None
    assert "cpu-template" in result.failed
    assert w.pod_annotations("p") == {}
    assert w.state.ledger.pods() == [] and w.cluster.events == []


def test_pods_seen_through_events_count_against_the_cards() -> None:
    w = world(a40_node("node1"))
    running = manifest(
        "running",
        node="node1",
        phase="Running",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-devices-allocated": f"{A40_UUIDS[0]},NVIDIA,46000,0:;",
        },
        gpu=1,
        gpumem=46000,
    )
    w.add_pod(signed(running))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert w.pod_annotations("p")["hami.io/vgpu-devices-allocated"].startswith(A40_UUIDS[1])


def test_a_refusal_counts_hamis_tokens_over_all_the_nodes_cards() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("a", gpu=1, gpumem=40000), "node1")
    refused = w.filter(manifest("b", gpu=2, gpumem=10000), "node1")
    assert refused.node_names is None
    message = refused.failed["node1"]
    assert message.endswith("[1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory]")
    assert message.index("insufficient memory") < message.index("[")
