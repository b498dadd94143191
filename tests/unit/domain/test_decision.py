from typing import Any

import pytest

from tests.unit.domain.builders import A40_UUIDS, a40_cards, card, container, pod
from vgpu.domain import (
    Device,
    Ledger,
    NodeRejection,
    NoPlacement,
    Placement,
    PodPolicies,
    Policy,
    PolicyError,
    Reason,
    SchedulingConfig,
    decide,
    encode_pod_grants,
    extender_scores,
    plan_pod,
)
from vgpu.domain.decision import Decision
from vgpu.domain.fit import PodPlan


def plan(*containers: dict[str, Any], config: SchedulingConfig | None = None, **kw: Any) -> PodPlan:
    result = plan_pod(pod(*containers, **kw), config or SchedulingConfig())
    assert result is not None
    return result


def cluster(**nodes: list[Device]) -> Ledger:
    ledger = Ledger()
    for name, devices in nodes.items():
        ledger.set_node(name, devices)
    return ledger


def run(ledger: Ledger, the_plan: PodPlan, grant: bool = True) -> Decision:
    decision = decide(the_plan, [ledger.view(n) for n in ledger.nodes()])
    if grant and isinstance(decision, Placement):
        ledger.grant(the_plan.key, decision.node, decision.grants, the_plan.init_count)
    return decision


def occupy(ledger: Ledger, uuid: str, name: str, mem: int) -> None:
    """Place a pod on the one given card, so that card is busier than the others."""
    pinned = plan(
        container(gpu=1, mem=mem), name=name, annotations={"nvidia.com/use-gpuuuid": uuid}
    )
    placed(run(ledger, pinned))


def placed(decision: Decision) -> Placement:
    assert isinstance(decision, Placement), decision
    return decision


def rejected(decision: Decision) -> NoPlacement:
    assert isinstance(decision, NoPlacement), decision
    return decision


def test_seed_a40_example() -> None:
    ledger = cluster(node1=a40_cards())
    decision = placed(run(ledger, plan(container(gpu=1, mem=20000, cores=80))))
    assert decision.node == "node1"
    (only,) = decision.grants
    assert encode_pod_grants(decision.grants) == f"{only[0].uuid},NVIDIA,20000,80:;"
    assert only[0].uuid in A40_UUIDS


def test_pod_without_gpu_has_no_plan() -> None:
    assert plan_pod(pod(container(cpu="1")), SchedulingConfig()) is None


def test_memory_shortage_is_explained_with_numbers() -> None:
    ledger = cluster(
        node1=[
            card("GPU-a", memory=12000),
            card("GPU-b", 1, memory=8000),
            card("GPU-c", 2, type="NVIDIA T4"),
        ]
    )
    decision = rejected(
        run(
            ledger, plan(container(gpu=1, mem=20000), annotations={"nvidia.com/use-gputype": "A40"})
        )
    )
    rejection = decision.rejections["node1"]
    assert rejection.reason is Reason.INSUFFICIENT_MEMORY
    assert (
        "3 cards: 2 insufficient memory (need 20000 MiB, best card has 12000 free), 1 type mismatch"
        in rejection.message
    )
    assert rejection.hami_reason == "1/3 CardTypeMismatch, 2/3 CardInsufficientMemory"
    assert decision.message == "0/1 nodes are available: 1 insufficient memory"


def test_type_selection_matches_whole_words() -> None:
    a100 = card("GPU-a100", type="NVIDIA A100-SXM4-80GB", memory=81920)
    a10 = card("GPU-a10", 1, type="NVIDIA A10", memory=23028)
    ledger = cluster(node1=[a100, a10])
    for wanted, uuid in (("A100", "GPU-a100"), ("a10", "GPU-a10"), ("NVIDIA A10", "GPU-a10")):
        the_plan = plan(container(gpu=1, mem=1000), annotations={"nvidia.com/use-gputype": wanted})
        assert placed(run(ledger, the_plan, grant=False)).grants[0][0].uuid == uuid
    the_plan = plan(container(gpu=1, mem=1000), annotations={"nvidia.com/nouse-gputype": "A100"})
    assert placed(run(ledger, the_plan, grant=False)).grants[0][0].uuid == "GPU-a10"


def test_uuid_use_and_nouse() -> None:
    ledger = cluster(node1=a40_cards())
    use = plan(
        container(gpu=1, mem=10), annotations={"nvidia.com/use-gpuuuid": f" {A40_UUIDS[1]} "}
    )
    assert placed(run(ledger, use, grant=False)).grants[0][0].uuid == A40_UUIDS[1]
    avoid = plan(container(gpu=2, mem=10), annotations={"nvidia.com/nouse-gpuuuid": A40_UUIDS[0]})
    assert rejected(run(ledger, avoid)).rejections["node1"].cards[0].reason is Reason.UUID_MISMATCH


def test_unhealthy_and_cordoned_cards_are_skipped() -> None:
    ledger = Ledger()
    ledger.set_node(
        "n",
        [card("GPU-sick", healthy=False), card("GPU-off", 1), card("GPU-ok", 2)],
        frozenset({"GPU-off"}),
    )
    assert placed(run(ledger, plan(container(gpu=1, mem=10)))).grants[0][0].uuid == "GPU-ok"
    rejection = rejected(run(ledger, plan(container(gpu=1, mem=46068), name="big"))).rejections["n"]
    assert {c.reason for c in rejection.cards} == {
        Reason.UNHEALTHY,
        Reason.CORDONED,
        Reason.INSUFFICIENT_MEMORY,
    }


def test_slices_run_out_at_the_split_count() -> None:
    ledger = cluster(n=[card("GPU-a", count=2)])
    for i in range(2):
        placed(run(ledger, plan(container(gpu=1, mem=10), name=f"p{i}")))
    rejection = rejected(run(ledger, plan(container(gpu=1, mem=10), name="p3"))).rejections["n"]
    assert rejection.reason is Reason.SLICES_EXHAUSTED


def test_full_cores_request_wants_an_unused_card() -> None:
    ledger = cluster(n=[card("GPU-a")])
    placed(run(ledger, plan(container(gpu=1, mem=10, cores=0), name="small")))
    rejection = rejected(
        run(ledger, plan(container(gpu=1, mem=10, cores=100), name="whole"))
    ).rejections["n"]
    assert rejection.reason is Reason.EXCLUSIVE


def test_zero_core_request_cannot_join_a_card_whose_cores_are_all_used() -> None:
    ledger = cluster(n=[card("GPU-a")])
    placed(run(ledger, plan(container(gpu=1, mem=10, cores=60), name="a")))
    placed(run(ledger, plan(container(gpu=1, mem=10, cores=40), name="b")))
    rejection = rejected(run(ledger, plan(container(gpu=1, mem=10, cores=0), name="c"))).rejections[
        "n"
    ]
    assert rejection.reason is Reason.CORES_EXHAUSTED


def test_insufficient_cores() -> None:
    ledger = cluster(n=[card("GPU-a")])
    placed(run(ledger, plan(container(gpu=1, mem=10, cores=70), name="a")))
    rejection = rejected(
        run(ledger, plan(container(gpu=1, mem=10, cores=50), name="b"))
    ).rejections["n"]
    assert rejection.reason is Reason.INSUFFICIENT_CORES
    assert "need 50 cores, best card has 30 free" in rejection.message


def test_multi_gpu_container_gets_distinct_cards() -> None:
    ledger = cluster(n=[card(f"GPU-{i}", i) for i in range(4)])
    grants = placed(run(ledger, plan(container(gpu=3, mem=1000)))).grants[0]
    assert len({g.uuid for g in grants}) == 3


def test_more_cards_than_the_node_has() -> None:
    ledger = cluster(n=a40_cards())
    rejection = rejected(run(ledger, plan(container(gpu=3)))).rejections["n"]
    assert (
        rejection.reason is Reason.NOT_ENOUGH_CARDS
        and "wants 3 cards, node has 2" in rejection.message
    )


def test_percentage_memory_resolves_on_each_card() -> None:
    ledger = cluster(n=[card("GPU-small", 0, memory=10000), card("GPU-big", 1, memory=40000)])
    grants = placed(run(ledger, plan(container(gpu=2, pct=50)))).grants[0]
    assert sorted(g.memory for g in grants) == [5000, 20000]


def test_numa_bind_keeps_a_containers_cards_on_one_numa_node() -> None:
    devices = [card("GPU-0", 0, numa=0), card("GPU-1", 1, numa=1), card("GPU-2", 2, numa=1)]
    ledger = cluster(n=devices)
    bound = plan(container(gpu=2, mem=10), annotations={"nvidia.com/numa-bind": "true"})
    assert {g.uuid for g in placed(run(ledger, bound, grant=False)).grants[0]} == {"GPU-1", "GPU-2"}
    three = plan(container(gpu=3, mem=10), annotations={"nvidia.com/numa-bind": "true"})
    rejection = rejected(run(ledger, three)).rejections["n"]
    assert rejection.reason is Reason.NUMA


def test_gpu_binpack_fills_the_busiest_card_and_spread_the_idlest() -> None:
    ledger = cluster(n=[card("GPU-0", 0), card("GPU-1", 1)])
    occupy(ledger, "GPU-1", name="first", mem=1000)
    binpack = plan(
        container(gpu=1, mem=1000), annotations={"hami.io/gpu-scheduler-policy": "binpack"}
    )
    spread = plan(
        container(gpu=1, mem=1000), annotations={"hami.io/gpu-scheduler-policy": "spread"}
    )
    assert placed(run(ledger, binpack, grant=False)).grants[0][0].uuid == "GPU-1"
    assert placed(run(ledger, spread, grant=False)).grants[0][0].uuid == "GPU-0"


def test_node_binpack_and_spread() -> None:
    ledger = cluster(a=[card("GPU-a")], b=[card("GPU-b")])
    occupy(ledger, "GPU-b", name="seed", mem=1000)
    binpack = plan(
        container(gpu=1, mem=1000), annotations={"hami.io/node-scheduler-policy": "binpack"}
    )
    spread = plan(
        container(gpu=1, mem=1000), annotations={"hami.io/node-scheduler-policy": "Spread"}
    )
    assert placed(run(ledger, binpack, grant=False)).node == "b"
    decision = placed(run(ledger, spread, grant=False))
    assert decision.node == "a"
    assert [s.node for s in decision.scores] == ["a", "b"]
    assert extender_scores(decision.scores) == {"a": 10, "b": 9}


def test_defaults_come_from_config() -> None:
    ledger = cluster(a=[card("GPU-a")], b=[card("GPU-b")])
    occupy(ledger, "GPU-b", name="seed", mem=1000)
    spread = SchedulingConfig(policies=PodPolicies(node=Policy.SPREAD))
    assert (
        placed(run(ledger, plan(container(gpu=1, mem=1000), config=spread), grant=False)).node
        == "a"
    )


def test_percentage_requests_score_above_zero() -> None:
    ledger = cluster(a=[card("GPU-a")])
    decision = placed(run(ledger, plan(container(gpu=1, pct=30, cores=10)), grant=False))
    assert decision.scores[0].score > 0.3


def test_ties_break_by_node_name_then_card_index() -> None:
    ledger = cluster(zeta=a40_cards(), alpha=[card("GPU-x", 1), card("GPU-w", 0)])
    decision = placed(run(ledger, plan(container(gpu=1, mem=100)), grant=False))
    assert decision.node == "alpha" and decision.grants[0][0].uuid == "GPU-w"


@pytest.mark.parametrize("value", ["best-fit", "binpack,best-fit"])
def test_unknown_policy_is_an_error_naming_the_annotation(value: str) -> None:
    with pytest.raises(PolicyError) as caught:
        plan(container(gpu=1), annotations={"hami.io/gpu-scheduler-policy": value})
    assert "hami.io/gpu-scheduler-policy" in str(caught.value)


def test_mutex_policy_wants_an_idle_card() -> None:
    ledger = cluster(n=[card("GPU-0", 0), card("GPU-1", 1)])
    occupy(ledger, "GPU-0", name="a", mem=10)
    mutex = plan(
        container(gpu=1, mem=10), annotations={"hami.io/gpu-scheduler-policy": "binpack,mutex"}
    )
    assert placed(run(ledger, mutex, grant=False)).grants[0][0].uuid == "GPU-1"


def test_containers_of_one_pod_see_each_others_grants() -> None:
    ledger = cluster(n=[card("GPU-0", 0, memory=1000)])
    two = plan(container("a", gpu=1, mem=600), container("b", gpu=1, mem=600))
    rejection = rejected(run(ledger, two)).rejections["n"]
    assert rejection.message.startswith("container b:")


def test_init_containers_reuse_what_app_containers_get() -> None:
    ledger = cluster(n=[card("GPU-0", 0, memory=1000)])
    the_plan = plan(container("setup", init=True, gpu=1, mem=800), container("app", gpu=1, mem=800))
    decision = placed(run(ledger, the_plan))
    assert [len(c) for c in decision.grants] == [1, 1]
    assert ledger.usage("n", "GPU-0").memory == 800


def test_node_without_registered_gpus() -> None:
    ledger = Ledger()
    decision = rejected(decide(plan(container(gpu=1)), [ledger.view("ghost")]))
    assert decision.rejections["ghost"].reason is Reason.NODE_UNREGISTERED


def test_decision_is_deterministic() -> None:
    ledger = cluster(**{f"n{i}": [card(f"GPU-{i}-{j}", j) for j in range(4)] for i in range(5)})
    the_plan = plan(container(gpu=2, mem=5000, cores=20))
    first = run(ledger, the_plan, grant=False)
    assert all(run(ledger, the_plan, grant=False) == first for _ in range(5))


def test_rejections_of_other_nodes_are_reported_with_a_placement() -> None:
    ledger = cluster(small=[card("GPU-s", memory=100)], large=[card("GPU-l")])
    decision = placed(run(ledger, plan(container(gpu=1, mem=1000))))
    assert decision.node == "large"
    assert isinstance(decision.rejections["small"], NodeRejection)
