"""A rejection copied from an alike node is the one `fit_pod` gives that node.

Clusters here are built from a few node templates, loaded with a few grant patterns, so that
many nodes are alike card for card (and so share one computed rejection) while others differ
in one card. Every node's answer from the index, first and remembered, is compared with
`fit_pod` on that node's view: reason, message, HAMi's reason counts, per-card ids and reasons.
"""

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.domain import (
    Budget,
    ContainerRequest,
    Device,
    DeviceGrant,
    Ledger,
    NoPlacement,
    PodPlan,
    PodPolicies,
    Policy,
    fit_pod,
)
from vgpu.domain.ledger.alike_rejection import AlikeRejection
from vgpu.domain.quota import UNLIMITED
from vgpu.domain.reasons import NodeRejection
from vgpu.domain.selectors import CardSelector

TEMPLATES = (
    ((24000, 10, 100, 0), (24000, 10, 100, 0), (24000, 10, 100, 1), (24000, 10, 100, 1)),
    ((81920, 4, 100, 0), (16000, 2, 100, 0)),
)


def cards(node: str, template: int, unhealthy: int | None) -> list[Device]:
    return [
        Device(f"GPU-{node}-{i}", i, "NVIDIA A40", count, memory, cores, numa, i != unhealthy)
        for i, (memory, count, cores, numa) in enumerate(TEMPLATES[template])
    ]


requests = st.builds(
    ContainerRequest,
    count=st.integers(1, 4),
    memory=st.sampled_from((0, 2000, 12000, 20000, 40000, 90000)),
    memory_percent=st.sampled_from((25, 50, 100)),
    cores=st.sampled_from((0, 10, 50, 100)),
)


@st.composite
def plans(draw: Any) -> PodPlan:
    init_count = draw(st.integers(0, 1))
    reqs = tuple(draw(requests) for _ in range(init_count + draw(st.integers(1, 2))))
    uuids = draw(st.sampled_from((frozenset(), frozenset({"GPU-n1-0", "GPU-n2-1", "GPU-n4-1"}))))
    return PodPlan(
        key="default/new",
        namespace="default",
        containers=tuple(f"c{i}" for i in range(len(reqs))),
        requests=reqs,
        init_count=init_count,
        selector=CardSelector(
            use_types=draw(st.sampled_from(((), (("a40",),), (("t4",),)))),
            avoid_uuids=uuids,
            numa_bind=draw(st.booleans()),
        ),
        policies=PodPolicies(
            node=draw(st.sampled_from(Policy)),
            gpu=draw(st.sampled_from(Policy)),
            idle_only=draw(st.booleans()),
            topology=draw(st.integers(0, 4)) == 0,
        ),
    )


budgets = st.one_of(
    st.just(UNLIMITED),
    st.builds(
        Budget, memory=st.sampled_from((None, 5000, 50000)), cores=st.sampled_from((None, 60))
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_nodes_rejection_is_what_fit_pod_says_for_that_node(data: st.DataObject) -> None:
    ledger = Ledger()
    nodes = [f"n{i}" for i in range(data.draw(st.integers(2, 8)))]
    template = data.draw(st.integers(0, 1))
    grant = st.tuples(st.integers(0, 1), st.sampled_from(((4000, 10), (20000, 50), (1000, 0))))
    loads = data.draw(st.lists(st.lists(grant, max_size=5), min_size=1, max_size=3))
    for node in nodes:  # a few loads over many nodes: most nodes have an alike twin
        unhealthy = data.draw(st.sampled_from((None,) * 8 + (0, 1)))
        cordon = data.draw(st.integers(0, 7)) == 0
        cordoned = frozenset({f"GPU-{node}-1"}) if cordon else frozenset()
        ledger.set_node(node, cards(node, template, unhealthy), cordoned)
        for i, (card, (memory, cores)) in enumerate(data.draw(st.sampled_from(loads))):
            held = DeviceGrant(f"GPU-{node}-{card}", "NVIDIA", memory, cores)
            ledger.grant(f"default/{node}-{i}", node, ((held,),), strict=False)
    if data.draw(st.booleans()):
        ledger.settle()  # as after a rebuild: which nodes are alike is worked out up front
    for _ in range(3):
        plan = data.draw(plans())
        budget = data.draw(budgets)
        expected = {node: fit_pod(plan, ledger.view(node), budget) for node in nodes}
        for _ in range(2):  # computed (or copied from an alike node), then remembered
            decision = ledger.feasible(plan, nodes, budget)
            for node, rejection in decision.rejections.items():
                assert_same_rejection(rejection, expected[node])
            indexed = ledger.decide(plan, nodes, budget)
            if isinstance(indexed, NoPlacement):
                assert list(indexed.rejections) == nodes
                for node, rejection in indexed.rejections.items():
                    assert_same_rejection(rejection, expected[node])


def assert_same_rejection(got: NodeRejection, want: object) -> None:
    assert isinstance(want, NodeRejection)
    assert got.hami_reason == want.hami_reason
    assert got.line == want.line == f"{want.message} [{want.hami_reason}]"
    assert (got.node, got.reason, got.message, got.considered) == (
        want.node,
        want.reason,
        want.message,
        want.considered,
    )
    assert got.cards == want.cards
    assert got == want and want == got and hash(got) == hash(want)


def test_alike_nodes_share_one_fit_and_each_names_its_own_cards() -> None:
    ledger = Ledger()
    for node in ("a", "b", "c"):
        ledger.set_node(node, cards(node, 0, None))
        ledger.grant(
            f"default/{node}", node, ((DeviceGrant(f"GPU-{node}-2", "NVIDIA", 4000, 10),),)
        )
    plan = PodPlan(
        "default/big",
        "default",
        ("main",),
        (ContainerRequest(4, memory=0, memory_percent=100, cores=100),),
        0,
        CardSelector(),
        PodPolicies(),
    )
    refused = ledger.decide(plan)
    assert isinstance(refused, NoPlacement)
    copies = [r for r in refused.rejections.values() if isinstance(r, AlikeRejection)]
    assert len(copies) == 2  # b and c copy a's rejection
    for node, rejection in refused.rejections.items():
        assert [c.uuid for c in rejection.cards] == [f"GPU-{node}-2"]
        assert (
            rejection.hami_reason
            == "1/4 CardInsufficientMemory, 3/4 AllocatedCardsInsufficientRequest"
        )
    edited = replace(copies[0], message="changed")
    assert edited.message == "changed" and edited.cards == copies[0].cards
    assert edited.hami_reason == copies[0].hami_reason
    assert edited.line == f"changed [{copies[0].hami_reason}]"
