"""HAMi's reason tokens with counts over every card considered, after our sentence."""

from typing import Any

from tests.unit.domain.builders import card, container, pod
from vgpu.domain import Budget, NodeRejection, NodeView, SchedulingConfig, fit_pod, plan_pod


def rejection(node: NodeView, budget: Budget | None = None, **kw: object) -> NodeRejection:
    annotations: Any = kw.pop("annotations", {})
    plan = plan_pod(pod(container(**kw), annotations=annotations), SchedulingConfig())
    assert plan is not None
    result = fit_pod(plan, node) if budget is None else fit_pod(plan, node, budget)
    assert isinstance(result, NodeRejection), result
    return result


def four(**kw: object) -> NodeView:
    return NodeView("n", tuple(card(f"GPU-{i}", i, **kw) for i in range(4)), {})


def test_quota_leaves_one_card_short_of_two() -> None:
    result = rejection(four(), Budget(cards=1), gpu=2)
    assert result.hami_reason == "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit"


def test_cards_that_fit_count_as_too_few_beside_the_card_rejections() -> None:
    cards = (
        card("GPU-0", 0, memory=8000),
        card("GPU-1", 1, type="NVIDIA T4"),
        card("GPU-2", 2),
        card("GPU-3", 3),
    )
    result = rejection(
        NodeView("n", cards, {}), gpu=3, mem=20000, annotations={"nvidia.com/use-gputype": "A40"}
    )
    assert result.hami_reason == (
        "1/4 CardInsufficientMemory, 1/4 CardTypeMismatch, 2/4 AllocatedCardsInsufficientRequest"
    )
    assert result.message.startswith("container main: wants 3 x (20000 MiB, 0% cores): 2 of 4")


def test_a_numa_shortfall_counts_the_last_numa_nodes_cards_as_too_few() -> None:
    # HAMi counts the cards of each NUMA node it gave up as NumaNotFit, and those it still
    # held on the last one tried as AllocatedCardsInsufficientRequest
    cards = tuple(card(f"GPU-{i}", i, numa=i, healthy=i != 3) for i in range(4))
    result = rejection(NodeView("n", cards, {}), gpu=2, annotations={"nvidia.com/numa-bind": "1"})
    assert result.hami_reason == (
        "1/4 AllocatedCardsInsufficientRequest, 1/4 CardNotHealth, 2/4 NumaNotFit"
    )


def test_every_card_rejected_counts_over_all_of_them() -> None:
    result = rejection(four(healthy=False), gpu=1)
    assert result.hami_reason == "4/4 CardNotHealth"


def test_too_many_cards_for_the_node_keeps_the_node_token() -> None:
    assert rejection(four(), gpu=5).hami_reason == "NodeInsufficientDevice"
