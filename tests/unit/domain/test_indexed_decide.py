"""`Ledger.decide` (indexed, pruning) answers exactly as `decide` over every node's view.

Random sequences of node changes (cards added, turning unhealthy or cordoned, nodes removed),
grants and releases are replayed; after each step random pods of every kind are decided both
ways: the same node, cards and score when the pod fits, the same rejection for every node
(reason, message, per-card reasons) when it does not. Containers may ask for more devices than
a node has cards (a MIG card can give one container several instances); every placement reads
back from its annotations as it was made and the strict ledger accepts it.
"""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.builders import a100_mig_profiles
from vgpu.domain import (
    Budget,
    ContainerRequest,
    Decision,
    Device,
    DeviceGrant,
    Ledger,
    NoPlacement,
    Placement,
    PodPlan,
    PodPolicies,
    Policy,
    ScoringWeights,
    decide,
    encode_pod_grants,
)
from vgpu.domain.mig import MigPlacement, MigSlot
from vgpu.domain.mig.grants import decode_granted, mig_reservations
from vgpu.domain.quota import UNLIMITED
from vgpu.domain.selectors import CardSelector

NODES = ("n0", "n1", "n2", "n3", "n4")
TYPES = ("NVIDIA A100-SXM4-80GB", "NVIDIA A40", "NVIDIA T4")
MODES = ("hami-core", "mig")
# an A100-80GB's profiles, only its small ones, or none (a MIG card without allowlisted models)
PROFILE_SETS = (a100_mig_profiles(), a100_mig_profiles()[3:], ())


@st.composite
def cards(draw: Any, node: str) -> list[Device]:
    # few distinct values so that nodes are often alike and scores often tie
    count = draw(st.integers(1, 4))
    memory = draw(st.sampled_from((16000, 24000, 81920)))
    mig = [draw(st.integers(0, 3)) == 0 for _ in range(count)]
    return [
        Device(
            uuid=f"GPU-{node}-{i}",
            index=i,
            type=draw(st.sampled_from(TYPES)) if draw(st.booleans()) else TYPES[0],
            count=draw(st.sampled_from((1, 2, 4, 10))),
            memory=memory if draw(st.booleans()) else draw(st.sampled_from((16000, 81920))),
            cores=draw(st.sampled_from((100, 100, 0, 200))),
            numa=draw(st.integers(0, 1)),
            healthy=draw(st.integers(0, 9)) > 0,
            mode=MODES[1] if mig[i] else MODES[0],
            mig_profiles=draw(st.sampled_from(PROFILE_SETS)) if mig[i] else (),
        )
        for i in range(count)
    ]


requests = st.builds(
    ContainerRequest,
    count=st.sampled_from((1, 1, 2, 3, 5)),
    memory=st.sampled_from((0, 1000, 4000, 12000, 20000, 40000, 90000)),
    memory_percent=st.sampled_from((10, 25, 50, 100)),
    cores=st.sampled_from((0, 0, 10, 25, 50, 100)),
)
selectors = st.builds(
    CardSelector,
    use_types=st.sampled_from(((), (("a100",),), (("a40",), ("t4",)))),
    avoid_types=st.sampled_from(((), (("t4",),))),
    use_uuids=st.sampled_from((frozenset(), frozenset({"GPU-n0-0", "GPU-n1-1", "GPU-n2-0"}))),
    avoid_uuids=st.sampled_from((frozenset(), frozenset({"GPU-n3-0"}))),
    numa_bind=st.booleans(),
    modes=st.sampled_from(((), ("hami-core",), ("mig",), ("hami-core", "mig"))),
)
weights = st.one_of(
    st.just(ScoringWeights()),
    st.builds(ScoringWeights, st.integers(0, 3), st.integers(0, 3), st.integers(1, 3)),
)
policies = st.builds(
    PodPolicies,
    node=st.sampled_from(Policy),
    gpu=st.sampled_from(Policy),
    numa=st.booleans(),
    idle_only=st.integers(0, 5).map(lambda n: n == 0),
    topology=st.booleans(),
    weights=weights,
)


@st.composite
def pair_scores(draw: Any, node: str) -> dict[str, dict[str, int]]:
    """Symmetric scores over the node's possible cards (sometimes none published)."""
    scores: dict[str, dict[str, int]] = {}
    if draw(st.integers(0, 3)) == 0:
        return scores
    for a in range(4):
        for b in range(a + 1, 4):
            score = draw(st.sampled_from((10, 20, 50, 450, 1250)))
            scores.setdefault(f"GPU-{node}-{a}", {})[f"GPU-{node}-{b}"] = score
            scores.setdefault(f"GPU-{node}-{b}", {})[f"GPU-{node}-{a}"] = score
    return scores


budgets = st.one_of(
    st.just(UNLIMITED),
    st.builds(
        Budget,
        memory=st.sampled_from((None, 0, 5000, 30000, 200000)),
        cores=st.sampled_from((None, 20, 100, 300)),
        cards=st.sampled_from((None, 1, 2, 5)),
        blocked=st.integers(0, 9).map(lambda n: n == 0),
    ),
)


@st.composite
def plans(draw: Any, key: str) -> PodPlan:
    init_count = draw(st.integers(0, 2))
    app_count = draw(st.integers(1, 2))
    reqs = tuple(
        draw(st.one_of(st.none(), requests)) if i < init_count else draw(requests)
        for i in range(init_count + app_count)
    )
    return PodPlan(
        key=key,
        namespace="default",
        containers=tuple(f"c{i}" for i in range(len(reqs))),
        requests=reqs,
        init_count=init_count,
        selector=draw(selectors) if draw(st.booleans()) else CardSelector(),
        policies=draw(policies),
    )


def assert_same(indexed: Decision, exhaustive: Decision) -> None:
    if isinstance(exhaustive, Placement):
        assert isinstance(indexed, Placement), indexed
        assert (indexed.node, indexed.grants) == (exhaustive.node, exhaustive.grants)
        assert indexed.scores[0] == exhaustive.scores[0]
    else:
        assert isinstance(indexed, NoPlacement), indexed
        assert list(indexed.rejections.items()) == list(exhaustive.rejections.items())
        assert indexed.message == exhaustive.message


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_indexed_decide_matches_exhaustive_decide(data: st.DataObject) -> None:
    ledger = Ledger()
    cordon = st.frozensets(st.sampled_from([f"GPU-n{n}-{i}" for n in range(5) for i in range(4)]))
    for node in NODES[: data.draw(st.integers(1, 5))]:
        ledger.set_node(node, data.draw(cards(node)), pair_scores=data.draw(pair_scores(node)))
    for step in range(data.draw(st.integers(5, 25))):
        action = data.draw(
            st.sampled_from(("pod", "pod", "pod", "release", "node", "remove", "overcommit"))
        )
        if action == "overcommit":  # a pod the cluster reports, recorded even past capacity
            node = data.draw(st.sampled_from(NODES))
            memory = data.draw(st.sampled_from((1000, 30000, 90000)))
            cores = data.draw(st.sampled_from((10, 100, 150)))
            start = data.draw(st.integers(0, 7))  # a MIG instance (or a slice) seen anywhere
            instance = data.draw(
                st.sampled_from((None, MigSlot("1g.10gb", MigPlacement(start, 1))))
            )
            grant = DeviceGrant(
                f"GPU-{node}-{data.draw(st.integers(0, 3))}", "NVIDIA", memory, cores, instance
            )
            ledger.grant(f"default/seen{step}", node, ((grant,),), strict=False)
        elif action == "node":
            node = data.draw(st.sampled_from(NODES))
            ledger.set_node(
                node, data.draw(cards(node)), data.draw(cordon), data.draw(pair_scores(node))
            )
        elif action == "remove":
            ledger.remove_node(data.draw(st.sampled_from(NODES)))
        elif action == "release" and ledger.pods():
            ledger.release(data.draw(st.sampled_from(sorted(a.pod for a in ledger.pods()))))
        else:
            plan = data.draw(plans(f"default/p{step}"))
            budget = data.draw(budgets)
            names = data.draw(
                st.one_of(
                    st.just(ledger.nodes()),
                    st.lists(st.sampled_from((*NODES, "gone")), min_size=1, max_size=7),
                )
            )
            exhaustive = decide(plan, [ledger.view(n) for n in dict.fromkeys(names)], budget)
            assert_same(ledger.decide(plan, names, budget), exhaustive)
            assert_same(ledger.decide(plan, names, budget), exhaustive)  # remembered rejections
            # combined-scores mode: every score and rejection, also re-scoring a pod's own grant
            held = sorted(a.pod for a in ledger.pods())
            exclude = data.draw(st.sampled_from([None, *held]))
            views = [ledger.view(n, exclude) for n in dict.fromkeys(names)]
            every = decide(plan, views, budget)
            assert ledger.feasible(plan, names, budget, exclude) == every
            assert ledger.feasible(plan, names, budget, exclude) == every  # remembered answers
            if isinstance(exhaustive, Placement):
                grants = exhaustive.grants
                assert decode_granted(encode_pod_grants(grants), mig_reservations(grants)) == grants
                if data.draw(st.booleans()):
                    ledger.grant(plan.key, exhaustive.node, grants, plan.init_count)


def test_pod_that_fits_nowhere_gets_every_nodes_reason_and_a_change_is_seen() -> None:
    ledger = Ledger()
    for node in ("a", "b"):
        ledger.set_node(node, [Device(f"GPU-{node}", 0, "NVIDIA A40", 2, 24000)])
    big = PodPlan(
        "default/big",
        "default",
        ("main",),
        (ContainerRequest(1, memory=20000),),
        0,
        CardSelector(),
        PodPolicies(),
    )
    ledger.grant("default/x", "a", ((_grant("GPU-a", 10000),),))
    ledger.grant("default/y", "b", ((_grant("GPU-b", 10000),),))
    refused = ledger.decide(big, ["a", "b", "c"])
    assert isinstance(refused, NoPlacement)
    assert [r.reason.value for r in refused.rejections.values()] == [
        "CardInsufficientMemory",
        "CardInsufficientMemory",
        "NodeUnregistered",
    ]
    ledger.release("default/y")  # the remembered rejection of b must not outlive the change
    placed = ledger.decide(big, ["a", "b", "c"])
    assert isinstance(placed, Placement) and placed.node == "b"


@pytest.mark.parametrize("policy", list(Policy))
def test_alike_nodes_tie_and_the_first_name_wins_under_either_policy(policy: Policy) -> None:
    ledger = Ledger()
    for node in ("c", "a", "b"):
        ledger.set_node(node, [Device(f"GPU-{node}", 0, "NVIDIA A40", 2, 24000)])
    plan = PodPlan(
        "default/p",
        "default",
        ("main",),
        (ContainerRequest(1, memory=1000),),
        0,
        CardSelector(),
        PodPolicies(node=policy),
    )
    placed = ledger.decide(plan)
    assert isinstance(placed, Placement) and placed.node == "a"


def test_view_can_leave_a_pods_own_grant_out_without_touching_the_ledger() -> None:
    ledger = Ledger()
    ledger.set_node("a", [Device("GPU-a", 0, "NVIDIA A40", 2, 24000)])
    ledger.grant("default/x", "a", ((_grant("GPU-a", 10000),),))
    assert "GPU-a" not in ledger.view("a", exclude_pod="default/x").usage
    assert ledger.view("a").usage["GPU-a"].memory == 10000
    assert ledger.view("a", exclude_pod="default/other").usage["GPU-a"].memory == 10000


def _grant(uuid: str, memory: int) -> DeviceGrant:
    return DeviceGrant(uuid, "NVIDIA", memory, 10)
