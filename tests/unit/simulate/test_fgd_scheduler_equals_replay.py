"""FGD live in the scheduler decides as the trace replay does, for the same cluster state.

The scheduler's side: the cluster and pods in HAMi's terms (`trace.hami`: cards split 20 with
the models' memory, shares asking `gpucores` = `gpumem-percentage`, CPU as requests), pods held
as HAMi grants, nodes' allocatable CPU and the CPU already requested on them in the ledger, FGD
as the node and GPU policy, `Ledger.decide` among the nodes whose free CPU covers the pod's
(kube-scheduler's resource filter). The replay's side: the same cluster in milli-GPU and the
replay's node index with the paper's FGD, nodes ranked in name order. Same typical shapes on
both, CPU and CPU-only shapes included.
"""

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
from vgpu.domain.fragmentation import MILLI, Fgd, MilliNode, MilliPod, MilliWorkload, TypicalShape
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload
from vgpu.domain.host import HostResources

MODELS = ["T4", "V100M32"]
MEMORY = 1 << 20  # MiB of host memory: never short here
CPUS = [0, 2000, 4000, 8000]

# a card holds nothing, one whole-card pod (None), or shares in percent adding up to <= 100
held = st.one_of(
    st.just(None),
    st.lists(st.integers(5, 60), max_size=4).map(lambda shares: _within(shares, 100)),
)
# a node: its card model, its cards, its allocatable CPU and how much of it is requested
nodes = st.lists(
    st.tuples(
        st.sampled_from(MODELS),
        st.sampled_from([1, 2, 4, 8]).flatmap(lambda n: st.lists(held, min_size=n, max_size=n)),
        st.sampled_from([8000, 16000, 32000]),
        st.integers(0, 16).map(lambda n: 1000 * n),
    ),
    min_size=1,
    max_size=8,
)
models = st.one_of(st.just(""), st.sampled_from(MODELS))
cpus = st.sampled_from(CPUS)
# (cards, percent per card, card model or "" for any, CPU): a share of one card, whole cards,
# or (in the typical shapes) no card at all
gpu_shapes = st.one_of(
    st.tuples(st.just(1), st.integers(5, 99), models, cpus),
    st.tuples(st.sampled_from([1, 2]), st.just(100), models, cpus),
)
shapes = st.one_of(gpu_shapes, st.tuples(st.just(0), st.just(0), st.just(""), cpus))

Cluster = list[tuple[str, list[list[int] | None], int, int]]
Shape = tuple[int, int, str, int]


def _within(shares: list[int], limit: int) -> list[int]:
    kept, total = [], 0
    for share in shares:
        if total + share <= limit:
            kept.append(share)
            total += share
    return kept


def replay_side(cluster: Cluster, workload: list[tuple[Shape, int]]) -> NodeIndex:
    milli_nodes = [
        MilliNode(
            model, cpu - used, MEMORY, tuple(0 if c is None else MILLI - 10 * sum(c) for c in cards)
        )
        for model, cards, cpu, used in cluster
    ]
    typical = MilliWorkload(
        [
            TypicalShape(n, gpus, 10 * pct, cpu, frozenset({m} if m else ()))
            for (gpus, pct, m, cpu), n in workload
        ]
    )
    return NodeIndex(milli_nodes, list(range(len(cluster))), Fgd(typical))


def scheduler_side(cluster: Cluster) -> Ledger:
    ledger = Ledger()
    for i, (model, cards, cpu, used) in enumerate(cluster):
        name = f"n{i}"
        devices = hami_devices(name, MilliNode(model, 0, 0, (MILLI,) * len(cards)))
        ledger.set_node(name, devices)
        ledger.set_host(name, HostResources(cpu, MEMORY))
        ledger.charge_host(f"held/cpu-{name}", name, HostResources(used, 0), bound=True)
        for device, shares in zip(devices, cards, strict=True):
            for k, percent in enumerate([100] if shares is None else shares):
                grant = DeviceGrant(device.uuid, "NVIDIA", device.memory * percent // 100, percent)
                ledger.grant(f"held/{device.uuid}-{k}", name, ((grant,),))
    return ledger


def card_shape(gpus: int, percent: int, model: str, cpu: int) -> CardShape:
    types = ((model.lower(),),) if model else ()
    return CardShape(gpus, memory_percent=percent, cores=percent, use_types=types, cpu=cpu)


@settings(max_examples=150, deadline=None)
@given(
    nodes,
    st.lists(st.tuples(shapes, st.integers(1, 5)), min_size=1, max_size=4),
    st.lists(gpu_shapes, min_size=1, max_size=4),
)
def test_the_scheduler_places_each_pod_where_the_replay_does(
    cluster: Cluster, workload: list[tuple[Shape, int]], arrivals: list[Shape]
) -> None:
    index = replay_side(cluster, workload)
    ledger = scheduler_side(cluster)
    recent = CardWorkload([(card_shape(*shape), n) for shape, n in workload])
    config = SchedulingConfig(
        policies=PodPolicies(node=Policy.FGD, gpu=Policy.FGD), recent_shapes=lambda: recent
    )
    for j, (gpus, percent, model, cpu) in enumerate(arrivals):
        wanted = MilliPod(cpu, 0, gpus, 10 * percent, frozenset({model} if model else ()))
        chosen = index.choose(wanted)
        # kube-scheduler's resource filter: only the nodes whose free CPU covers the pod's
        roomy = [f"n{i}" for i, node in enumerate(index.nodes) if node.cpu >= cpu]
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
