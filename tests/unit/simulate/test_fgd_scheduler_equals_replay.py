"""FGD and FGD-balanced live in the scheduler decide as the trace replay does, for the same
cluster state.

The scheduler's side: the cluster and pods in HAMi's terms (`trace.hami`: cards split 20 with
the models' memory, shares asking `gpucores` = `gpumem-percentage`, CPU and host memory as
requests), pods held as HAMi grants, nodes' allocatable CPU and memory and what is already
requested on them in the ledger, the policy as the node and GPU policy, `Ledger.decide` among
the nodes whose free CPU and memory cover the pod's (kube-scheduler's resource filter), and
for FGD-balanced the cluster's cards counted by the ledger. The replay's side: the same cluster
in milli-GPU and the replay's node index with the paper's FGD or vgpu's FGD-balanced (claims on
the cluster's card models), nodes ranked in name order. Same typical shapes on both, CPU, host
memory and CPU-only shapes included.
"""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.app.simulate.trace.hami import hami_devices, hami_manifest
from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.domain import (
    DeviceGrant,
    Ledger,
    Placement,
    PodPolicies,
    Policy,
    SchedulingConfig,
    plan_pod,
    pod_from_manifest,
)
from vgpu.domain.fragmentation import (
    MILLI,
    Balanced,
    Fgd,
    MilliNode,
    MilliPod,
    MilliWorkload,
    TypicalShape,
)
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload
from vgpu.domain.host import HostResources

MODELS = ["T4", "V100M32"]
CPUS = [0, 2000, 4000, 8000]
MEMORIES = [0, 8192, 32768]  # MiB of host memory a pod asks for

# a card holds nothing, one whole-card pod (None), or shares in percent adding up to <= 100
held = st.one_of(
    st.just(None),
    st.lists(st.integers(5, 60), max_size=4).map(lambda shares: _within(shares, 100)),
)
# a node: its card model, its cards, its allocatable CPU and how much of it is requested, its
# allocatable host memory and how much of it is requested
nodes = st.lists(
    st.tuples(
        st.sampled_from(MODELS),
        st.sampled_from([1, 2, 4, 8]).flatmap(lambda n: st.lists(held, min_size=n, max_size=n)),
        st.sampled_from([8000, 16000, 32000]),
        st.integers(0, 16).map(lambda n: 1000 * n),
        st.sampled_from([32768, 65536]),
        st.integers(0, 16).map(lambda n: 2048 * n),
    ),
    min_size=1,
    max_size=8,
)
models = st.one_of(st.just(""), st.sampled_from(MODELS))
cpus = st.sampled_from(CPUS)
memories = st.sampled_from(MEMORIES)
# (cards, percent per card, card model or "" for any, CPU, host memory): a share of one card,
# whole cards, or (in the typical shapes) no card at all
gpu_shapes = st.one_of(
    st.tuples(st.just(1), st.integers(5, 99), models, cpus, memories),
    st.tuples(st.sampled_from([1, 2]), st.just(100), models, cpus, memories),
)
shapes = st.one_of(gpu_shapes, st.tuples(st.just(0), st.just(0), st.just(""), cpus, memories))

Cluster = list[tuple[str, list[list[int] | None], int, int, int, int]]
Shape = tuple[int, int, str, int, int]


def _within(shares: list[int], limit: int) -> list[int]:
    kept, total = [], 0
    for share in shares:
        if total + share <= limit:
            kept.append(share)
            total += share
    return kept


def replay_side(cluster: Cluster, workload: list[tuple[Shape, int]], policy: Policy) -> NodeIndex:
    milli_nodes = [
        MilliNode(
            model,
            cpu - used,
            memory - used_memory,
            tuple(0 if c is None else MILLI - 10 * sum(c) for c in cards),
        )
        for model, cards, cpu, used, memory, used_memory in cluster
    ]
    typical = MilliWorkload(
        [
            TypicalShape(n, gpus, 10 * pct, cpu, frozenset({m} if m else ()), memory)
            for (gpus, pct, m, cpu, memory), n in workload
        ]
    )
    if policy is Policy.FGD:
        return NodeIndex(milli_nodes, list(range(len(cluster))), Fgd(typical))
    cards = Counter[str]()
    for node in milli_nodes:
        cards[node.model] += len(node.free)
    return NodeIndex(milli_nodes, list(range(len(cluster))), Balanced(typical, cards))


def scheduler_side(cluster: Cluster) -> Ledger:
    ledger = Ledger()
    for i, (model, cards, cpu, used, memory, used_memory) in enumerate(cluster):
        name = f"n{i}"
        devices = hami_devices(name, MilliNode(model, 0, 0, (MILLI,) * len(cards)))
        ledger.set_node(name, devices)
        ledger.set_host(name, HostResources(cpu, memory))
        held_host = HostResources(used, used_memory)
        ledger.charge_host(f"held/host-{name}", name, held_host, bound=True)
        for device, shares in zip(devices, cards, strict=True):
            for k, percent in enumerate([100] if shares is None else shares):
                grant = DeviceGrant(device.uuid, "NVIDIA", device.memory * percent // 100, percent)
                ledger.grant(f"held/{device.uuid}-{k}", name, ((grant,),))
    return ledger


def card_shape(gpus: int, percent: int, model: str, cpu: int, memory: int) -> CardShape:
    types = ((model.lower(),),) if model else ()
    return CardShape(
        gpus, memory_percent=percent, cores=percent, use_types=types, cpu=cpu, host_memory=memory
    )


@pytest.mark.parametrize("policy", [Policy.FGD, Policy.FGD_BALANCED])
@settings(max_examples=150, deadline=None)
@given(
    nodes,
    st.lists(st.tuples(shapes, st.integers(1, 5)), min_size=1, max_size=4),
    st.lists(gpu_shapes, min_size=1, max_size=4),
)
def test_the_scheduler_places_each_pod_where_the_replay_does(
    policy: Policy, cluster: Cluster, workload: list[tuple[Shape, int]], arrivals: list[Shape]
) -> None:
    index = replay_side(cluster, workload, policy)
    ledger = scheduler_side(cluster)
    recent = CardWorkload([(card_shape(*shape), n) for shape, n in workload])
    config = SchedulingConfig(
        policies=PodPolicies(node=policy, gpu=policy),
        recent_shapes=lambda: recent,
        card_counts=ledger.card_counts,
    )
    for j, (gpus, percent, model, cpu, memory) in enumerate(arrivals):
        wanted = MilliPod(cpu, memory, gpus, 10 * percent, frozenset({model} if model else ()))
        chosen = index.choose(wanted)
        # kube-scheduler's resource filter: only the nodes whose free CPU and memory cover it
        roomy = [
            f"n{i}"
            for i, node in enumerate(index.nodes)
            if node.cpu >= cpu and node.memory >= memory
        ]
        plan = plan_pod(pod_from_manifest(hami_manifest(f"p{j}", wanted, {})), config)
        assert plan is not None
        decision = ledger.decide(plan, roomy)
        if chosen is None:
            assert not isinstance(decision, Placement)
            continue
        cards = index.place(chosen, wanted)
        assert isinstance(decision, Placement)
        assert decision.node == f"n{chosen}"
        assert [int(g.uuid.rsplit("-", 1)[1]) for g in decision.grants[0]] == list(cards)
        ledger.grant(plan.key, decision.node, decision.grants)
        ledger.charge_host(plan.key, decision.node, plan.host, bound=True)
