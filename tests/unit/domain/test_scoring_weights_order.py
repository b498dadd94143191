"""`hami.io/device-scoring-weights` changes which card a pod gets; a bad value refuses it."""

import pytest

from tests.unit.domain.builders import card, container, pod
from vgpu.domain import (
    ContainerRequest,
    NodeRejection,
    NodeView,
    PodPolicies,
    Policy,
    PolicyError,
    SchedulingConfig,
    ScoringWeights,
    Usage,
    card_order,
    card_score,
    fit_pod,
    plan_pod,
)

WEIGHTS = "hami.io/device-scoring-weights"


def node() -> NodeView:
    """GPU-a: memory mostly used by one pod; GPU-b: two small pods (4 slots, 40000 MiB each)."""
    cards = (card("GPU-a", 0, count=4, memory=40000), card("GPU-b", 1, count=4, memory=40000))
    return NodeView("n", cards, {"GPU-a": Usage(1, 30000, 0), "GPU-b": Usage(2, 1000, 0)})


def first_card(annotations: dict[str, str]) -> str:
    plan = plan_pod(pod(container(gpu=1, mem=1000), annotations=annotations), SchedulingConfig())
    assert plan is not None
    result = fit_pod(plan, node())
    assert not isinstance(result, NodeRejection), result
    return result.grants[0][0].uuid


def test_binpack_with_default_weights_fills_the_memory_heavy_card() -> None:
    assert first_card({"hami.io/gpu-scheduler-policy": "binpack"}) == "GPU-a"


def test_slot_only_weights_make_binpack_fill_the_card_with_more_pods() -> None:
    annotations = {"hami.io/gpu-scheduler-policy": "binpack", WEIGHTS: "slot=1, core=0, memory=0"}
    assert first_card(annotations) == "GPU-b"


def test_weights_turn_spread_around_too() -> None:
    assert first_card({}) == "GPU-b"  # spread, 1,1,1: GPU-b is emptier overall
    assert first_card({WEIGHTS: "memory=0,slot=5,core=0"}) == "GPU-a"  # fewer pods on GPU-a


def test_card_order_follows_the_weights() -> None:
    request = ContainerRequest(count=1, memory=1000)
    binpack = PodPolicies(gpu=Policy.BINPACK)
    slots_only = PodPolicies(gpu=Policy.BINPACK, weights=ScoringWeights(1, 0, 0))
    assert card_order(request, node(), binpack) == ("GPU-a", "GPU-b")
    assert card_order(request, node(), slots_only) == ("GPU-b", "GPU-a")


def test_card_score_weighs_each_fraction() -> None:
    gpu = card("GPU-a", 0, count=4, memory=40000, cores=100)
    used = Usage(slices=2, memory=10000, cores=20)
    assert card_score(gpu, used) == pytest.approx(10 * (0.5 + 0.2 + 0.25))
    assert card_score(gpu, used, ScoringWeights(0, 0, 3)) == pytest.approx(7.5)
    assert card_score(card("GPU-z", 0, count=0, memory=0, cores=0), used) == 0.0


@pytest.mark.parametrize(
    "value",
    ["slot=1,core=1", "slot=1,core=1,memory=-1", "gpu=1,core=1,memory=1", "slot=0,core=0,memory=0"],
)
def test_a_malformed_value_refuses_the_pod_naming_the_annotation(value: str) -> None:
    with pytest.raises(PolicyError, match=WEIGHTS):
        plan_pod(pod(container(gpu=1), annotations={WEIGHTS: value}), SchedulingConfig())
