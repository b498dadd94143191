"""The replay's node index answers as asking every node would, pod after pod."""

import random

import pytest

from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.domain.fragmentation import (
    MilliNode,
    MilliPod,
    MilliWorkload,
    PaperPolicy,
    RandomPlacement,
    Scored,
    TypicalShape,
    fits,
    placement_policy,
)

MODELS = ("T4", "G2", "P100")


def cluster(rng: random.Random, count: int) -> list[MilliNode]:
    return [
        MilliNode(
            rng.choice(MODELS),
            rng.choice((8000, 16000, 32000)),
            rng.choice((16384, 65536)),
            (1000,) * rng.choice((1, 2, 4, 8)),
        )
        for _ in range(count)
    ]


def pods(rng: random.Random, count: int) -> list[MilliPod]:
    made = []
    for _ in range(count):
        kind = rng.random()
        models = frozenset(rng.sample(MODELS, 2)) if rng.random() < 0.3 else frozenset()
        cpu, memory = rng.choice((0, 1000, 4000)), rng.choice((0, 2048, 8192))
        if kind < 0.1:
            made.append(MilliPod(cpu, memory))
        elif kind < 0.75:
            made.append(MilliPod(cpu, memory, 1, rng.choice((100, 250, 300, 500, 700)), models))
        else:
            made.append(MilliPod(cpu, memory, rng.choice((1, 2, 4)), 1000, models))
    return made


def asking_every_node(
    nodes: list[MilliNode], ranks: list[int], pod: MilliPod, policy: Scored
) -> int | None:
    feasible = [i for i, node in enumerate(nodes) if fits(node, pod)]
    if not feasible:
        return None
    return min(feasible, key=lambda i: (-policy.score(nodes[i], pod), ranks[i]))


WORKLOAD = MilliWorkload(
    [
        TypicalShape(5, 1, 500),
        TypicalShape(3, 1, 1000, memory=4096),
        TypicalShape(2, 2, 1000, 4000),
        TypicalShape(2, 1, 300, 1000, frozenset({"T4"})),
    ]
)


@pytest.mark.parametrize("policy", [p for p in PaperPolicy if p is not PaperPolicy.RANDOM])
def test_the_index_chooses_the_node_asking_every_node_chooses(policy: PaperPolicy) -> None:
    rng = random.Random(policy.value)
    nodes = cluster(rng, 30)
    ranks = list(range(len(nodes)))
    rng.shuffle(ranks)
    rules = placement_policy(policy, WORKLOAD, rng, nodes)
    assert not isinstance(rules, RandomPlacement)
    index = NodeIndex(nodes, ranks, rules)
    placed = failed = 0
    for pod in pods(rng, 400):
        expected = asking_every_node(index.nodes, ranks, pod, rules)
        assert index.choose(pod) == expected
        if expected is None:
            failed += 1
        else:
            index.place(expected, pod)
            placed += 1
    assert placed > 100 and failed > 50  # the cluster filled up on the way


def test_random_draws_among_the_nodes_that_fit_and_reports_none_when_none_does() -> None:
    rng = random.Random(3)
    nodes = cluster(rng, 12)
    index = NodeIndex(nodes, list(range(12)), RandomPlacement(random.Random(5)))
    chosen = set()
    for pod in pods(rng, 300):
        before = list(index.nodes)
        node = index.choose(pod)
        if node is None:
            assert not any(fits(n, pod) for n in before)
            continue
        assert fits(before[node], pod)
        chosen.add(node)
        index.place(node, pod)
    assert len(chosen) == 12


def test_placing_takes_the_cards_the_policy_picks() -> None:
    node = MilliNode("T4", 8000, 8192, (1000, 600))
    index = NodeIndex([node], [0], placement_policy(PaperPolicy.BESTFIT, WORKLOAD, random.Random()))
    assert index.place(0, MilliPod(1000, 1024, 1, 500)) == (1,)
    assert index.nodes[0] == MilliNode("T4", 7000, 7168, (1000, 100), frozenset({0}))
