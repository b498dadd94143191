"""HAMi v2.10's own scheduler unit cases (Project-HAMi/HAMi 4707fb0) for the fit, asked through
vgpu's public API: where vgpu agrees, the same answer; where it differs on purpose (README,
"Where vgpu differs from HAMi on purpose"), vgpu's answer pinned."""

from typing import Any

import pytest

from tests.unit.domain.builders import container, pod
from vgpu.domain import (
    Budget,
    Device,
    MigPlacement,
    MigProfile,
    NodeRejection,
    NodeView,
    Placement,
    SchedulingConfig,
    Usage,
    decide,
    fit_pod,
    plan_pod,
)

MIG = {"nvidia.com/vgpu-mode": "mig"}
TOPOLOGY = {"hami.io/gpu-scheduler-policy": "topology-aware"}


def plan(*containers: dict[str, Any], annotations: dict[str, str] | None = None) -> Any:
    planned = plan_pod(pod(*containers, annotations=annotations), SchedulingConfig())
    assert planned is not None
    return planned


def rejection(node: NodeView, *containers: dict[str, Any], **kw: Any) -> NodeRejection:
    budget = kw.pop("budget", None)
    result = fit_pod(plan(*containers, **kw), node, *(() if budget is None else (budget,)))
    assert isinstance(result, NodeRejection), result
    return result


def granted(decision: object) -> list[str]:
    assert isinstance(decision, Placement), decision
    return [g.uuid for container in decision.grants for g in container]


# --- Test_ResourceQuota: node1 with four cards, quotas on memory and cores ------------------


def quota_node(mode: str) -> NodeView:
    """HAMi's node1: device1-3 registered in `mode`, device4 with no mode."""
    memories = {"device1": 2000, "device2": 8000, "device3": 4000, "device4": 6000}
    cards = tuple(
        Device(uuid, index % 2, "NVIDIA", 10, memory, mode=mode if uuid != "device4" else "")
        for index, (uuid, memory) in enumerate(memories.items())
    )
    return NodeView("node1", cards, {})


@pytest.mark.parametrize(
    ("limits", "budget", "wanted"),
    [
        ({"gpu": 2, "cores": 100, "mem": 2000}, Budget(4000, 200), None),
        ({"gpu": 1}, Budget(2000, 100), None),
        ({"gpu": 1}, Budget(1500, 100), "4/4 ResourceQuotaNotFit"),
    ],
    ids=["multi device pass", "unspecified device pass", "unspecified device deny"],
)
def test_resource_quota_cases_on_hami_core_cards(
    limits: dict[str, int], budget: Budget, wanted: str | None
) -> None:
    result = fit_pod(plan(container(**limits)), quota_node("hami-core"), budget)
    if wanted is None:
        assert not isinstance(result, NodeRejection), result
    else:
        assert isinstance(result, NodeRejection)
        assert result.hami_reason == wanted


def test_resource_quota_multi_device_deny_counts_a_too_small_card_by_its_memory() -> None:
    # HAMi checks the quota before a card's own memory and says 3/4 ResourceQuotaNotFit;
    # vgpu judges each card on its own first, so device1 (2000 MiB) is short of memory
    result = rejection(
        quota_node("hami-core"), container(gpu=2, cores=60, mem=3000), budget=Budget(4000)
    )
    assert result.hami_reason == (
        "1/4 AllocatedCardsInsufficientRequest, 1/4 CardInsufficientMemory, 2/4 ResourceQuotaNotFit"
    )


def test_a_pod_naming_no_mode_takes_only_hami_core_cards() -> None:
    # HAMi puts it on device1-3 too (registered in HAMi's test mode "hami"); vgpu leaves them to
    # pods that name that mode, as no one can say that mode's plugin enforces a slice
    result = rejection(
        quota_node("hami"), container(gpu=2, cores=100, mem=2000), budget=Budget(4000, 200)
    )
    assert result.hami_reason == "1/4 AllocatedCardsInsufficientRequest, 3/4 ModeNotFit"
    named = fit_pod(
        plan(container(gpu=2, mem=2000), annotations={"nvidia.com/vgpu-mode": "hami"}),
        quota_node("hami"),
    )
    assert not isinstance(named, NodeRejection), named


# --- TestDevices_Fit (nvidia): the container's fit -------------------------------------------


def test_a_uuid_the_pod_does_not_name_is_a_card_reason() -> None:
    node = NodeView("n", (Device("dev-1", 0, "NVIDIA", 100, 128),), {})
    use = {"nvidia.com/use-gpuuuid": "dev-0"}
    assert rejection(node, container(gpu=1), annotations=use).hami_reason == "1/1 CardUuidMismatch"
    avoid = {"nvidia.com/nouse-gpuuuid": "dev-1"}
    assert rejection(node, container(gpu=1), annotations=avoid).hami_reason == (
        "1/1 CardUuidMismatch"
    )


@pytest.mark.parametrize("cards", [1, 2])
def test_more_cards_than_the_node_has_is_the_node_reason_first(cards: int) -> None:
    # HAMi's device Fit alone reports the cards (CardUuidMismatch, AllocatedCards...); its
    # filter, like vgpu's fit of the whole node, checks the node's card count before
    node = NodeView("n", tuple(Device(f"dev-{i}", i, "NVIDIA", 100, 128) for i in range(cards)), {})
    result = rejection(node, container(gpu=cards + 1), annotations={"nvidia.com/use-gpuuuid": "x"})
    assert result.hami_reason == "NodeInsufficientDevice"


# --- Test_fitInCertainDevice ------------------------------------------------------------------


def busy(uuid: str, numa: int = 0, **kw: Any) -> Device:
    """HAMi's test card: 4 slots, 8192 MiB, 4 cores, of which 1 slot, 2048 MiB, 1 core used."""
    return Device(uuid, 0, "NVIDIA", 4, 8192, cores=4, numa=numa, **kw)


USED = Usage(1, 2048, 1)


def test_numa_not_fit_counts_the_card_given_up_once() -> None:
    node = NodeView(
        "node-1", (busy("test-0", 0), busy("test-1", 1)), {"test-0": USED, "test-1": USED}
    )
    notes = {"nvidia.com/use-gputype": "NVIDIA", "nvidia.com/numa-bind": "true"}
    result = rejection(node, container(gpu=2, mem=1024, cores=1), annotations=notes)
    assert result.hami_reason == "1/2 AllocatedCardsInsufficientRequest, 1/2 NumaNotFit"


def mig_test_card() -> NodeView:
    profile = MigProfile("1g.test", 1, 2048, 1, (MigPlacement(0, 1),))
    card = busy("test-0", 1, mode="mig", mig_profiles=(profile,))
    return NodeView("node-1", (card,), {"test-0": USED})


def test_mode_is_mig_a_second_instance_has_no_placement() -> None:
    result = rejection(mig_test_card(), container(gpu=2, mem=1024, cores=1), annotations=MIG)
    assert result.hami_reason == (
        "1/1 AllocatedCardsInsufficientRequest, 1/1 CardMigTopologyInfeasible"
    )


def test_mode_is_mig_without_the_mig_mode_the_card_is_not_offered() -> None:
    # HAMi's case names no mode and lets the pod onto the MIG card; vgpu never does, so the
    # pod cannot take two instances of it either
    card = mig_test_card()
    assert rejection(card, container(gpu=1, mem=1024, cores=1)).hami_reason == "1/1 ModeNotFit"
    two = rejection(card, container(gpu=2, mem=1024, cores=1))
    assert two.hami_reason == "NodeInsufficientDevice"


# --- TestFit_TopologyNegativeScores, Test_Nvidia_GPU_Topology ---------------------------------


def negative_scores_node() -> NodeView:
    cards = tuple(Device(f"dev-{i}", i, "NVIDIA", 10, 8192) for i in range(3))
    scores = {
        "dev-0": {"dev-1": -5, "dev-2": -3},
        "dev-1": {"dev-0": -5, "dev-2": -1},
        "dev-2": {"dev-0": -3, "dev-1": -1},
    }
    return NodeView("n", cards, {}, pair_scores=scores)


@pytest.mark.parametrize(("count", "wanted"), [(1, {"dev-0"}), (2, {"dev-1", "dev-2"})])
def test_negative_pair_scores_still_choose_the_best_linked(count: int, wanted: set[str]) -> None:
    chosen = plan(container(gpu=count, mem=100, cores=10), annotations=TOPOLOGY)
    assert set(granted(decide(chosen, [negative_scores_node()]))) == wanted


def six_cards(scores: dict[str, dict[str, int]]) -> NodeView:
    cards = tuple(
        Device(uuid, 0, "NVIDIA", 4, 8192, numa=0 if uuid in "ab" else 1) for uuid in "abcdef"
    )
    return NodeView("node-1", cards, dict.fromkeys("abcdef", USED), pair_scores=scores)


def linked(heavy: dict[frozenset[str], int], default: int) -> dict[str, dict[str, int]]:
    return {
        a: {b: heavy.get(frozenset((a, b)), default) for b in "abcdef" if b != a} for a in "abcdef"
    }


def test_topology_aware_takes_the_three_best_linked_cards() -> None:
    scores = linked({frozenset("af"): 100, frozenset("cf"): 100}, 1)
    chosen = plan(container(gpu=3, mem=1024, cores=20), annotations=TOPOLOGY)
    # HAMi lists them f, c, a (its walk over these equal cards runs backwards); vgpu in card
    # order: equal cards are ordered by index, then id
    assert granted(decide(chosen, [six_cards(scores)])) == ["a", "c", "f"]


def test_topology_aware_gives_one_card_the_least_linked() -> None:
    scores = linked({frozenset((x, "f")): 1 for x in "abcde"}, 100)
    chosen = plan(container(gpu=1, mem=1024, cores=20), annotations=TOPOLOGY)
    assert granted(decide(chosen, [six_cards(scores)])) == ["f"]


# --- mig_allocation_test: several MIG instances on one GPU ------------------------------------


def single_gpu(mode: str, starts: range) -> NodeView:
    profile = MigProfile("1g.5gb", 1, 5120, 14, tuple(MigPlacement(s, 1) for s in starts))
    profiles = (profile,) if mode == "mig" else ()
    card = Device("GPU-a", 0, "NVIDIA", 7, 40960, mode=mode, mig_profiles=profiles)
    return NodeView("single-gpu-node", (card,), {})


def test_two_mig_instances_fit_on_one_gpu_at_distinct_placements() -> None:
    decision = decide(
        plan(container(gpu=2, mem=4000), annotations=MIG), [single_gpu("mig", range(7))]
    )
    assert isinstance(decision, Placement)
    (grants,) = decision.grants
    assert [g.uuid for g in grants] == ["GPU-a", "GPU-a"]
    assert grants[0].mig is not None and grants[1].mig is not None
    assert grants[0].mig.placement != grants[1].mig.placement


def test_one_free_placement_is_too_few_for_two_instances() -> None:
    result = rejection(single_gpu("mig", range(6, 7)), container(gpu=2, mem=4000), annotations=MIG)
    assert "1/1 CardMigTopologyInfeasible" in result.hami_reason.split(", ")


def test_a_hami_core_pod_keeps_the_physical_card_count() -> None:
    hami_core = {"nvidia.com/vgpu-mode": "hami-core"}
    result = rejection(
        single_gpu("hami-core", range(0)), container(gpu=2, mem=4000), annotations=hami_core
    )
    assert result.hami_reason == "NodeInsufficientDevice"


# --- Test_Filter: two nodes, node and card policies -------------------------------------------


def filter_nodes(mode: str) -> list[NodeView]:
    """HAMi's node1 (device1 holds 2000 MiB, 25 %) and node2 (device4 holds 6000 MiB, 75 %);
    device1 and device3 are registered in `mode`, device2 and device4 with none."""

    def node(name: str, first: str, second: str, used: str, usage: Usage) -> NodeView:
        cards = (
            Device(first, 0, "NVIDIA", 10, 8000, mode=mode),
            Device(second, 1, "NVIDIA", 10, 8000, mode=""),
        )
        return NodeView(name, cards, {used: usage})

    return [
        node("node1", "device1", "device2", "device1", Usage(1, 2000, 25)),
        node("node2", "device3", "device4", "device4", Usage(1, 6000, 75)),
    ]


@pytest.mark.parametrize(
    ("node_policy", "gpu_policy", "wanted"),
    [
        ("binpack", "binpack", ("node2", "device4")),
        ("binpack", "spread", ("node2", "device3")),
        ("spread", "binpack", ("node1", "device1")),
        ("spread", "spread", ("node1", "device2")),
    ],
)
def test_filter_node_and_card_policies(
    node_policy: str, gpu_policy: str, wanted: tuple[str, str]
) -> None:
    notes = {
        "hami.io/node-scheduler-policy": node_policy,
        "hami.io/gpu-scheduler-policy": gpu_policy,
    }
    decision = decide(
        plan(container(gpu=1, cores=20, mem=1000), annotations=notes),
        filter_nodes("hami-core"),
    )
    assert isinstance(decision, Placement)
    assert (decision.node, granted(decision)[0]) == wanted


def test_filter_spread_nodes_binpack_cards_skips_a_card_of_another_mode() -> None:
    # HAMi takes device1, registered in its test mode "hami"; vgpu only takes device2 there
    notes = {"hami.io/node-scheduler-policy": "spread", "hami.io/gpu-scheduler-policy": "binpack"}
    decision = decide(
        plan(container(gpu=1, cores=20, mem=1000), annotations=notes), filter_nodes("hami")
    )
    assert isinstance(decision, Placement)
    assert (decision.node, granted(decision)) == ("node1", ["device2"])
