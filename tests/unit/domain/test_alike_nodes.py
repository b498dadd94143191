"""Alike nodes (same capacity, same slices, cores and memory in use) in the indexed decision.

`Ledger.decide` stops at the first node of a block of alike nodes that fits, when the pod's
score cannot depend on which cards it gets; otherwise it must look at the whole block. Each
answer is checked against the exhaustive `decide`.
"""

from dataclasses import replace

import pytest

from vgpu.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    Ledger,
    Placement,
    PodPlan,
    PodPolicies,
    Policy,
    decide,
)
from vgpu.domain.ledger import index
from vgpu.domain.ledger.fullness_order import FullnessOrder
from vgpu.domain.ledger.node_summary import Capacity
from vgpu.domain.selectors import CardSelector


def plan(
    *requests: ContainerRequest | None, init: int = 0, node: Policy = Policy.BINPACK
) -> PodPlan:
    return PodPlan(
        "default/p",
        "default",
        tuple(f"c{i}" for i in range(len(requests))),
        requests,
        init,
        CardSelector(),
        PodPolicies(node=node, gpu=Policy.BINPACK),
    )


def placed_on(ledger: Ledger, pod: PodPlan) -> str:
    indexed = ledger.decide(pod)
    exhaustive = decide(pod, [ledger.view(n) for n in ledger.nodes()])
    assert isinstance(indexed, Placement) and isinstance(exhaustive, Placement)
    assert (indexed.node, indexed.grants) == (exhaustive.node, exhaustive.grants)
    return indexed.node


@pytest.mark.parametrize("policy", list(Policy))
def test_the_first_alike_node_that_fits_wins_when_earlier_names_cannot_take_the_pod(
    policy: Policy,
) -> None:
    ledger = Ledger()
    for n in range(40):
        name = f"node-{n:02d}"
        healthy = n >= 7  # the first seven are alike in numbers but their card is broken
        ledger.set_node(name, [Device(f"GPU-{name}", 0, "NVIDIA L4", 10, 24000, healthy=healthy)])
    assert placed_on(ledger, plan(ContainerRequest(1, memory=1000, cores=5), node=policy)) == (
        "node-07"
    )


def mixed_cards(ledger: Ledger, name: str, used_card: int) -> None:
    """Two cards of different sizes; 4000 MiB in use on one of them (same totals either way)."""
    ledger.set_node(
        name,
        [
            Device(f"GPU-{name}-0", 0, "NVIDIA T4", 4, 16000),
            Device(f"GPU-{name}-1", 1, "NVIDIA A100", 4, 81920),
        ],
    )
    grant = DeviceGrant(f"GPU-{name}-{used_card}", "NVIDIA", 4000, 10)
    ledger.grant(f"default/run-{name}", name, ((grant,),))


def test_a_percentage_of_mixed_cards_can_score_differently_on_alike_nodes() -> None:
    ledger = Ledger()
    mixed_cards(ledger, "a", used_card=0)  # half of the small card: 8000 MiB
    mixed_cards(ledger, "b", used_card=1)  # half of the large card: 40960 MiB, fuller after
    assert placed_on(ledger, plan(ContainerRequest(1, memory_percent=50))) == "b"


def test_walk_yields_alike_nodes_together_by_name_best_block_first() -> None:
    order = FullnessOrder()
    capacity = Capacity(10, 100, 24000, 24000, 24000)
    for node, fullness, used in (
        ("d", 0.5, (1, 10, 1000)),
        ("b", 0.5, (1, 10, 1000)),
        ("c", 0.5, (2, 0, 1000)),  # as full, but not alike
        ("a", 0.1, (0, 0, 0)),
        ("e", 0.9, (3, 10, 1000)),
    ):
        order.put(node, capacity, fullness, used)

    def blocks(policy: Policy) -> list[list[str]]:
        return [list(alike) for _, alike in order.walk(policy, lambda _: 0.0)]

    for policy, first, last in ((Policy.BINPACK, "e", "a"), (Policy.SPREAD, "a", "e")):
        walked = blocks(policy)
        assert walked[0] == [first] and walked[-1] == [last]
        assert sorted(walked[1:3]) == [["b", "d"], ["c"]]  # as full, in either order
    order.remove("b")
    order.put("d", capacity, 0.9, (3, 10, 1000))
    assert blocks(Policy.BINPACK) == [["d", "e"], ["c"], ["a"]]
    assert blocks(Policy.SPREAD) == [["a"], ["c"], ["d", "e"]]


def test_a_node_event_that_changes_no_card_keeps_what_the_index_remembers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = Ledger()
    ledger.set_node("a", [Device("GPU-a", 0, "NVIDIA L4", 10, 24000)])
    # fits nowhere, and names a card (so that no alike node's answer could stand in for it)
    pod = replace(
        plan(ContainerRequest(1, memory=90000)), selector=CardSelector(avoid_uuids=frozenset({"x"}))
    )
    first = ledger.decide(pod)

    def refit(*_: object) -> None:
        raise AssertionError("the node was fitted again")

    monkeypatch.setattr(index, "fit_pod", refit)
    ledger.set_node("a", [Device("GPU-a", 0, "NVIDIA L4", 10, 24000)])  # e.g. its lock changed
    assert ledger.decide(pod) == first
