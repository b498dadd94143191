"""FGD live in the scheduler decides as the trace replay does, for the same cluster state.

The scheduler's side: the cluster and pods in HAMi's terms (`trace.hami`: cards split 20 with
the models' memory, shares asking `gpucores` = `gpumem-percentage`), pods held as HAMi grants,
FGD as the node and GPU policy, `Ledger.decide`. The replay's side: the same cluster in milli-GPU
and the replay's node index with the paper's FGD, nodes ranked in name order. Same typical
shapes on both. Node CPU is kube-scheduler's and left out (the pods ask none).
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

MODELS = ["T4", "V100M32"]

# a card holds nothing, one whole-card pod (None), or shares in percent adding up to <= 100
held = st.one_of(
    st.just(None),
    st.lists(st.integers(5, 60), max_size=4).map(lambda shares: _within(shares, 100)),
)
nodes = st.lists(
    st.tuples(
        st.sampled_from(MODELS),
        st.sampled_from([1, 2, 4, 8]).flatmap(lambda n: st.lists(held, min_size=n, max_size=n)),
    ),
    min_size=1,
    max_size=8,
)
models = st.one_of(st.just(""), st.sampled_from(MODELS))
# (cards, percent per card, card model or "" for any): a share of one card or whole cards
shapes = st.one_of(
    st.tuples(st.just(1), st.integers(5, 99), models),
    st.tuples(st.sampled_from([1, 2]), st.just(100), models),
)


def _within(shares: list[int], limit: int) -> list[int]:
    kept, total = [], 0
    for share in shares:
        if total + share <= limit:
            kept.append(share)
            total += share
    return kept


def replay_side(
    cluster: list[tuple[str, list[list[int] | None]]],
    workload: list[tuple[tuple[int, int, str], int]],
) -> NodeIndex:
    milli_nodes = [
        MilliNode(model, 0, 0, tuple(0 if c is None else MILLI - 10 * sum(c) for c in cards))
        for model, cards in cluster
    ]
    typical = MilliWorkload(
        [
            TypicalShape(n, gpus, 10 * pct, models=frozenset({m} if m else ()))
            for (gpus, pct, m), n in workload
        ]
    )
    return NodeIndex(milli_nodes, list(range(len(cluster))), Fgd(typical))


def scheduler_side(cluster: list[tuple[str, list[list[int] | None]]]) -> Ledger:
    ledger = Ledger()
    for i, (model, cards) in enumerate(cluster):
        devices = hami_devices(f"n{i}", MilliNode(model, 0, 0, (MILLI,) * len(cards)))
        ledger.set_node(f"n{i}", devices)
        for device, shares in zip(devices, cards, strict=True):
            for k, percent in enumerate([100] if shares is None else shares):
                grant = DeviceGrant(device.uuid, "NVIDIA", device.memory * percent // 100, percent)
                ledger.grant(f"held/{device.uuid}-{k}", f"n{i}", ((grant,),))
    return ledger


def card_shape(gpus: int, percent: int, model: str) -> CardShape:
    types = ((model.lower(),),) if model else ()
    return CardShape(gpus, memory_percent=percent, cores=percent, use_types=types)


@settings(max_examples=150, deadline=None)
@given(
    nodes,
    st.lists(st.tuples(shapes, st.integers(1, 5)), min_size=1, max_size=4),
    st.lists(shapes, min_size=1, max_size=4),
)
def test_the_scheduler_places_each_pod_where_the_replay_does(
    cluster: list[tuple[str, list[list[int] | None]]],
    workload: list[tuple[tuple[int, int, str], int]],
    arrivals: list[tuple[int, int, str]],
) -> None:
    index = replay_side(cluster, workload)
    ledger = scheduler_side(cluster)
    recent = CardWorkload([(card_shape(*shape), n) for shape, n in workload])
    config = SchedulingConfig(
        policies=PodPolicies(node=Policy.FGD, gpu=Policy.FGD), recent_shapes=lambda: recent
    )
    for j, (gpus, percent, model) in enumerate(arrivals):
        wanted = MilliPod(0, 0, gpus, 10 * percent, frozenset({model} if model else ()))
        chosen = index.choose(wanted)
        plan = plan_pod(pod_from_manifest(hami_manifest(f"p{j}", wanted, {})), config)
        assert plan is not None
        decision = ledger.decide(plan)
        if chosen is None:
            assert not isinstance(decision, Placement)
            continue
        cards = index.place(chosen, wanted)
        assert isinstance(decision, Placement)
        assert decision.node == f"n{chosen}"
        assert [int(g.uuid.rsplit("-", 1)[1]) for g in decision.grants[0]] == list(cards)
        ledger.grant(plan.key, decision.node, decision.grants)
