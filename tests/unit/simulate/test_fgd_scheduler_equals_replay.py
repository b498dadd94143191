"""FGD live in the scheduler decides as the trace replay does, for the same cluster state.

The scheduler's side: HAMi cards (split 20, the models' memory, 100 cores), pods placed with
HAMi grants, a new pod asking `gpucores` = `gpumem-percentage` = its share in percent, FGD
as its node and GPU policy, `Ledger.decide`. The replay's side: the same cluster in milli-GPU
and the replay's node index with the paper's FGD, nodes ranked in name order. Same typical
shapes on both. Node CPU is kube-scheduler's and left out (the pods ask none).
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.builders import container, pod
from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.domain import (
    Device,
    DeviceGrant,
    Ledger,
    Placement,
    PodPolicies,
    Policy,
    SchedulingConfig,
    plan_pod,
)
from vgpu.domain.fragmentation import MILLI, Fgd, MilliNode, MilliPod, TypicalShape, Workload
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload

MEMORY = {"T4": 15360, "V100M32": 32768}
SPLIT = 20

# a card holds nothing, one whole-card pod (None), or shares in percent adding up to <= 100
held = st.one_of(
    st.just(None),
    st.lists(st.integers(5, 60), max_size=4).map(lambda shares: _within(shares, 100)),
)
nodes = st.lists(
    st.tuples(
        st.sampled_from(sorted(MEMORY)),
        st.sampled_from([1, 2, 4, 8]).flatmap(lambda n: st.lists(held, min_size=n, max_size=n)),
    ),
    min_size=1,
    max_size=8,
)
models = st.one_of(st.just(""), st.sampled_from(sorted(MEMORY)))
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
    typical = Workload(
        [
            TypicalShape(n, gpus, 10 * pct, models=frozenset({m} if m else ()))
            for (gpus, pct, m), n in workload
        ]
    )
    return NodeIndex(milli_nodes, list(range(len(cluster))), Fgd(typical))


def scheduler_side(cluster: list[tuple[str, list[list[int] | None]]]) -> Ledger:
    ledger = Ledger()
    for i, (model, cards) in enumerate(cluster):
        memory = MEMORY[model]
        devices = [
            Device(f"GPU-{i}-{c}", c, f"NVIDIA {model}", SPLIT, memory, 100)
            for c in range(len(cards))
        ]
        ledger.set_node(f"n{i}", devices)
        for c, shares in enumerate(cards):
            grants = [(memory, 100)] if shares is None else [(memory * s // 100, s) for s in shares]
            for k, (mib, cores) in enumerate(grants):
                ledger.grant(
                    f"held/{i}-{c}-{k}",
                    f"n{i}",
                    ((DeviceGrant(f"GPU-{i}-{c}", "NVIDIA", mib, cores),),),
                )
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
        annotations = {"nvidia.com/use-gputype": model} if model else {}
        plan = plan_pod(
            pod(
                container(gpu=gpus, pct=percent, cores=percent),
                name=f"p{j}",
                annotations=annotations,
            ),
            config,
        )
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
