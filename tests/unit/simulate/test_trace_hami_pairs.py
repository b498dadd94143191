"""HAMi's node/GPU pairs on a trace: vgpu's scheduler behind kube-scheduler's CPU and memory
filter, ties to the lowest rank, pods without GPUs to the lowest-rank node with room."""

import random

import pytest

from vgpu.app.simulate.engine import ALL_PAIRS, PolicyPair
from vgpu.app.simulate.trace.files import TraceNode, TracePod
from vgpu.app.simulate.trace.hami import hami_devices, hami_manifest
from vgpu.app.simulate.trace.hami_pairs import HamiPair
from vgpu.app.simulate.trace.replay import Trace, replay
from vgpu.domain import (
    Ledger,
    Placement,
    PodPolicies,
    Policy,
    SchedulingConfig,
    decide,
    plan_pod,
    pod_from_manifest,
)
from vgpu.domain.fragmentation import MilliNode, MilliPod, PaperPolicy

BINPACK, SPREAD = Policy.BINPACK, Policy.SPREAD
SHARE = MilliPod(cpu=1000, memory=1024, gpus=1, milli=300)


def t4(cards: int = 2, cpu: int = 8000, memory: int = 32768) -> MilliNode:
    return MilliNode("T4", cpu, memory, (1000,) * cards)


def placed(hami: HamiPair, pod: MilliPod) -> tuple[int, tuple[int, ...]]:
    """Schedule `pod`: its node and cards."""
    node = hami.choose(pod)
    assert node is not None
    return node, hami.place(node, pod)


@pytest.mark.parametrize(("node_policy", "second"), [(BINPACK, 1), (SPREAD, 0)])
def test_the_node_policy_picks_the_fuller_or_the_emptier_node(
    node_policy: Policy, second: int
) -> None:
    hami = HamiPair([t4(), t4()], [1, 0], PolicyPair(node_policy, SPREAD))
    assert placed(hami, SHARE)[0] == 1  # equal nodes: the lowest rank
    assert hami.choose(SHARE) == second


@pytest.mark.parametrize(("gpu_policy", "cards"), [(BINPACK, [(0,), (0,)]), (SPREAD, [(0,), (1,)])])
def test_the_gpu_policy_picks_the_fuller_or_the_emptier_card(
    gpu_policy: Policy, cards: list[tuple[int, ...]]
) -> None:
    hami = HamiPair([t4()], [0], PolicyPair(BINPACK, gpu_policy))
    assert [placed(hami, SHARE)[1] for _ in cards] == cards


@pytest.mark.parametrize("short", [{"cpu": 500}, {"memory": 512}])
def test_a_node_short_of_cpu_or_host_memory_is_passed_over(short: dict[str, int]) -> None:
    hami = HamiPair([t4(**short), t4()], [0, 1], PolicyPair(BINPACK, SPREAD))
    assert hami.choose(SHARE) == 1
    hami = HamiPair([t4(cpu=1000, memory=1024), t4()], [0, 1], PolicyPair(BINPACK, SPREAD))
    assert placed(hami, SHARE)[0] == 0
    assert hami.choose(SHARE) == 1  # the first node's CPU and memory are spent now


def test_a_pod_without_gpus_takes_the_lowest_ranked_node_with_room() -> None:
    hami = HamiPair([t4(), t4(cpu=2000), t4()], [2, 0, 1], PolicyPair(SPREAD, SPREAD))
    cpu_only = MilliPod(cpu=1500, memory=1024)
    assert placed(hami, cpu_only) == (1, ())
    assert placed(hami, cpu_only) == (2, ())  # the rank-0 node has 500 CPU left
    assert hami.choose(MilliPod(cpu=9000)) is None


def test_model_pins_and_card_counts_are_the_scheduler_s() -> None:
    nodes = [t4(), MilliNode("G2", 8000, 32768, (1000,) * 4), MilliNode("X9", 8000, 32768, (1000,))]
    hami = HamiPair(nodes, [0, 1, 2], PolicyPair(BINPACK, SPREAD))
    assert hami.choose(MilliPod(gpus=1, milli=500, models=frozenset({"G2"}))) == 1
    assert hami.choose(MilliPod(gpus=1, milli=500, models=frozenset({"X9"}))) == 2  # unknown model
    assert hami.choose(MilliPod(gpus=4, milli=1000)) == 1
    assert hami.choose(MilliPod(gpus=8, milli=1000)) is None


def test_a_pair_replays_the_same_pods_as_the_paper_s_policies() -> None:
    nodes = [TraceNode(f"n{i}", t4(cards=4, cpu=16000)) for i in range(6)]
    pods = [
        TracePod(f"p{i}", MilliPod(2000, 2048, 1 + i % 2, 1000 if i % 2 else 100 * (1 + i % 9)))
        for i in range(40)
    ]
    trace = Trace.of("small", nodes, pods)
    hami = replay(trace, PolicyPair(BINPACK, SPREAD), seed=3)
    paper = replay(trace, PaperPolicy.FGD, seed=3)
    assert hami.pods == paper.pods  # the same tuned stream
    assert 0 < hami.placed < hami.pods  # 130 % was asked: some fit nowhere
    assert hami.allocation.keys() == paper.allocation.keys()  # the same arrived percents


def test_a_share_finer_than_a_percent_asks_the_percent_above_it() -> None:
    limits = hami_manifest("p", MilliPod(gpus=1, milli=5), {})["spec"]["containers"][0]
    assert limits["resources"]["limits"]["nvidia.com/gpucores"] == "1"
    hami = HamiPair([t4(cards=1)], [0], PolicyPair(BINPACK, BINPACK))
    for _ in range(20):  # the split count: 20 slices of the card
        placed(hami, MilliPod(gpus=1, milli=5))
    assert hami.choose(MilliPod(gpus=1, milli=5)) is None


class EveryNode:
    """The rules without HamiPair's shortcuts: `decide` over the views of every node with the
    pod's CPU and memory free, asked afresh for every pod."""

    def __init__(self, nodes: list[MilliNode], ranks: list[int], pair: PolicyPair) -> None:
        self.names = [f"node-{rank:02d}" for rank in ranks]
        self.cpu = [n.cpu for n in nodes]
        self.memory = [n.memory for n in nodes]
        self.ledger = Ledger()
        for name, node in zip(self.names, nodes, strict=True):
            self.ledger.set_node(name, hami_devices(name, node))
        self.config = SchedulingConfig(policies=PodPolicies(node=pair.node, gpu=pair.gpu))

    def schedule(self, n: int, pod: MilliPod) -> str | None:
        room = [i for i, name in enumerate(self.names) if self.fits(i, pod)]
        if not pod.gpus:
            chosen = min(room, key=self.names.__getitem__, default=None)
        else:
            manifest = hami_manifest(f"p{n}", pod, {})
            plan = plan_pod(pod_from_manifest(manifest), self.config)
            assert plan is not None
            decision = decide(plan, [self.ledger.view(self.names[i]) for i in room])
            if not isinstance(decision, Placement):
                return None
            self.ledger.grant(plan.key, decision.node, decision.grants)
            chosen = self.names.index(decision.node)
        if chosen is None:
            return None
        self.cpu[chosen] -= pod.cpu
        self.memory[chosen] -= pod.memory
        return self.names[chosen]

    def fits(self, node: int, pod: MilliPod) -> bool:
        return self.cpu[node] >= pod.cpu and self.memory[node] >= pod.memory


@pytest.mark.parametrize("pair", ALL_PAIRS, ids=lambda p: p.label)
def test_the_pair_decides_as_the_scheduler_asked_every_node_would(pair: PolicyPair) -> None:
    rng = random.Random(pair.label)
    nodes = [
        MilliNode(
            rng.choice(("T4", "G2")),
            rng.choice((8000, 24000)),
            rng.choice((16384, 65536)),
            (1000,) * rng.choice((1, 2, 4, 8)),
        )
        for _ in range(30)
    ]
    ranks = rng.sample(range(30), 30)
    hami, every = HamiPair(nodes, ranks, pair), EveryNode(nodes, ranks, pair)
    for n in range(400):
        gpus = rng.choice((0, 1, 1, 1, 2, 4))
        milli = rng.choice((50, 250, 500, 800)) if gpus == 1 and rng.random() < 0.7 else 1000
        models = frozenset({rng.choice(("T4", "G2"))}) if rng.random() < 0.3 else frozenset()
        pod = MilliPod(
            rng.choice((1000, 4000)), rng.choice((1024, 8192)), gpus, milli * (gpus > 0), models
        )
        chosen = hami.choose(pod)
        if chosen is not None:
            hami.place(chosen, pod)
        assert every.schedule(n, pod) == (None if chosen is None else f"node-{ranks[chosen]:02d}")
