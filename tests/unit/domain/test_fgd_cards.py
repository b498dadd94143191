"""FGD on vgpu's registered cards: free shares, the card and node it picks (worked out here),
the window of recent pod shapes, and how a pod asks for it."""

import doctest
import random
import re

import pytest

from tests.unit.domain.builders import container, pod
from vgpu.domain import (
    Device,
    DeviceGrant,
    Ledger,
    NodeView,
    Placement,
    PodPolicies,
    Policy,
    PolicyError,
    SchedulingConfig,
    Usage,
    decide,
    fit_pod,
    plan_pod,
    pod_policies,
)
from vgpu.domain.fragmentation import cards
from vgpu.domain.fragmentation.cards import (
    CardShape,
    CardWorkload,
    RecentShapes,
    free_milli,
    taken_milli,
)
from vgpu.domain.host import HostResources
from vgpu.domain.request import ContainerRequest

T4 = 15360  # MiB


def t4(uuid: str, index: int, **kw: object) -> Device:
    return Device(uuid, index, "NVIDIA T4", count=20, memory=T4, cores=100, **kw)  # type: ignore[arg-type]


def share(percent: int) -> Usage:
    """What a share of `percent` % (cores and memory) holds of a T4."""
    return Usage(1, T4 * percent // 100, percent)


HALF = CardShape(1, memory_percent=50, cores=50)
WHOLE = CardShape(1, memory_percent=100, cores=100)
# three in four pods take half a card, one in four a whole card
WORKLOAD = CardWorkload([(HALF, 3), (WHOLE, 1)])
FGD = SchedulingConfig(
    policies=PodPolicies(node=Policy.FGD, gpu=Policy.FGD), recent_shapes=lambda: WORKLOAD
)


def test_a_cards_free_share_is_its_scarcer_resource_and_none_when_it_takes_no_slice() -> None:
    card = t4("GPU-0", 0)
    assert free_milli(card, share(46)) == 540
    assert free_milli(card, Usage(1, T4 * 80 // 100, 10)) == 200  # memory binds
    assert free_milli(card, Usage(20, 0, 0)) == 0  # split count spent
    assert free_milli(card, Usage(), cordoned=True) == 0
    assert free_milli(t4("GPU-1", 1, healthy=False), Usage()) == 0
    assert taken_milli(ContainerRequest(1, memory_percent=46, cores=46), card) == 460
    assert taken_milli(ContainerRequest(1, memory=3072, cores=10), card) == 200
    assert taken_milli(ContainerRequest(2, cores=100), card) == 1000  # exclusive


def three_cards() -> NodeView:
    # free shares 1000, 700, 550
    cards_ = (t4("GPU-a0", 0), t4("GPU-a1", 1), t4("GPU-a2", 2))
    return NodeView("a", cards_, {"GPU-a1": share(30), "GPU-a2": share(45)})


def test_fgd_puts_a_share_on_the_card_that_strands_least() -> None:
    plan = plan_pod(pod(container(gpu=1, pct=20, cores=20)), FGD)
    assert plan is not None
    fit = fit_pod(plan, three_cards())
    # before: halves fit everywhere, a whole card fits leaving 1250 stranded: F = 1250 / 4
    # on GPU-a0 -> (800, 700, 550): no whole card left, F' = 2050 / 4: sigma(-0.2) -> 45
    # on GPU-a1 -> (1000, 500, 550): 1050 stranded for a whole card, F' = 1050 / 4: sigma(0.05) -> 51
    # on GPU-a2 -> (1000, 700, 350): 350 stranded for halves too, F' = 2100 / 4: sigma(-0.21) -> 44
    assert not isinstance(fit, type(None)) and fit.grants[0][0].uuid == "GPU-a1"
    assert fit.fullness == pytest.approx(3 * 51 / 100)
    for policy, card in ((Policy.BINPACK, "GPU-a2"), (Policy.SPREAD, "GPU-a0")):
        other = plan_pod(
            pod(container(gpu=1, pct=20, cores=20)),
            SchedulingConfig(policies=PodPolicies(gpu=policy)),
        )
        assert other is not None
        assert fit_pod(other, three_cards()).grants[0][0].uuid == card  # type: ignore[union-attr]


def test_fgd_picks_the_node_where_the_pod_adds_least_fragmentation_ties_by_name() -> None:
    ledger = Ledger()
    view = three_cards()
    ledger.set_node("a", view.devices)
    ledger.grant("a-30", "a", ((DeviceGrant("GPU-a1", "NVIDIA", T4 * 30 // 100, 30),),))
    ledger.grant("a-45", "a", ((DeviceGrant("GPU-a2", "NVIDIA", T4 * 45 // 100, 45),),))
    for name in ("c", "b"):  # idle nodes: 20 % on a fresh card strands it for a whole card: 45
        ledger.set_node(name, tuple(t4(f"GPU-{name}{i}", i) for i in range(3)))
    plan = plan_pod(pod(container(gpu=1, pct=20, cores=20)), FGD)
    assert plan is not None
    decision = ledger.decide(plan)
    assert isinstance(decision, Placement) and decision.node == "a"
    assert decision.scores[0].score == pytest.approx(3 * 51 / 100)
    assert decision.grants[0][0].uuid == "GPU-a1"
    decision = ledger.decide(plan, ["c", "b"])
    assert isinstance(decision, Placement) and decision.node == "b"  # equal scores: by name
    assert ledger.feasible(plan, ["a", "b", "c"]).scores[0].node == "a"  # type: ignore[union-attr]


def test_the_window_keeps_the_last_pods_once_each_and_refreshes_every_few() -> None:
    window = RecentShapes(window=3, refresh=2, coverage=1.0)
    assert window.current().shapes == ()
    window.observe("p1", [HALF])
    assert window.current().shapes == ((HALF, 1000),)  # the first pod needs no refresh
    window.observe("p1", [HALF])  # asked again: not counted again
    window.observe("p2", [WHOLE])
    assert window.current().shapes == ((HALF, 1000),)  # one new pod of two: not yet
    window.observe("p3", [WHOLE])
    assert window.current().shapes == ((WHOLE, 2000), (HALF, 1000))  # commonest first
    window.observe("p4", [WHOLE])  # p1 leaves the window of 3
    window.observe("p5", [WHOLE])
    assert window.current().shapes == ((WHOLE, 3000),)


def test_the_window_forgets_shapes_no_pod_in_it_has_whatever_tenants_ask_for() -> None:
    # every distinct gpumem a tenant asks for is a shape: what the window holds (and scans on
    # each refresh, inside /filter) must stay bounded by the window, not grow with the history
    window = RecentShapes(window=10, refresh=100, coverage=1.0)
    for i in range(2000):
        window.observe(f"p{i}", [CardShape(1, memory=1000 + i), CardShape(1, memory=1000 + i)])
    assert len(window._counts) == 10
    assert sum(window._counts.values()) == 20


def test_seed_shapes_fill_the_room_left_in_the_window() -> None:
    window = RecentShapes(window=4, refresh=1, seeds=[(HALF, 3.0), (WHOLE, 1.0)], coverage=1.0)
    assert dict(window.current().shapes) == {HALF: 3000, WHOLE: 1000}
    window.observe("p1", [WHOLE])
    window.observe("p2", [WHOLE])  # half the window is seen: seeds fill the other half
    assert dict(window.current().shapes) == {HALF: 1500, WHOLE: 2500}
    for key in ("p3", "p4"):
        window.observe(key, [WHOLE])
    assert dict(window.current().shapes) == {WHOLE: 4000}


def test_typical_shapes_that_barely_moved_are_kept_so_remembered_answers_last() -> None:
    window = RecentShapes(window=100, refresh=10, coverage=1.0, tolerance=0.1)
    for i in range(9):
        window.observe(f"h{i}", [HALF])
    window.observe("w0", [WHOLE])
    first = window.current()
    assert dict(first.shapes) == {HALF: 9000, WHOLE: 1000}
    for i in range(10):  # 18 halves and 2 wholes: the same shares
        window.observe(f"h{i + 9}" if i < 9 else "w1", [HALF] if i < 9 else [WHOLE])
    assert window.current() is first
    for i in range(10):  # 18 halves, 12 wholes: shares moved by 0.3
        window.observe(f"w{i + 2}", [WHOLE])
    assert dict(window.current().shapes) == {HALF: 18000, WHOLE: 12000}


def test_a_pod_asks_for_fgd_by_annotation_and_gets_the_schedulers_shapes() -> None:
    annotations = {"hami.io/node-scheduler-policy": "fgd", "hami.io/gpu-scheduler-policy": "fgd"}
    policies = pod_policies(annotations, PodPolicies())
    assert (policies.node, policies.gpu, policies.fragmentation) == (Policy.FGD, Policy.FGD, True)
    config = SchedulingConfig(recent_shapes=lambda: WORKLOAD)
    plan = plan_pod(pod(container(gpu=1, pct=20, cores=20), annotations=annotations), config)
    assert plan is not None and plan.policies.workload is WORKLOAD
    plain = plan_pod(pod(container(gpu=1, pct=20, cores=20)), config)
    assert plain is not None and plain.policies.workload is None  # binpack/spread: not needed
    alone = plan_pod(
        pod(container(gpu=1, pct=20, cores=20), annotations=annotations), SchedulingConfig()
    )
    assert alone is not None and alone.policies.workload is not None
    assert alone.policies.workload.shapes == ((CardShape(1, memory_percent=20, cores=20), 1),)
    again = plan_pod(
        pod(container(gpu=1, pct=20, cores=20), annotations=annotations), SchedulingConfig()
    )
    assert again is not None and again.policies == alone.policies  # one ledger shape for both
    with pytest.raises(PolicyError, match=re.escape("hami.io/node-scheduler-policy='fdg'")):
        pod_policies({"hami.io/node-scheduler-policy": "fdg"}, PodPolicies())


def test_a_pod_asks_for_fgd_balanced_by_annotation_and_gets_the_clusters_cards() -> None:
    annotations = {"hami.io/gpu-scheduler-policy": "binpack,fgd-balanced"}
    policies = pod_policies(annotations, PodPolicies())
    assert (policies.node, policies.gpu) == (Policy.BINPACK, Policy.FGD_BALANCED)
    assert policies.fragmentation and policies.balanced
    counts = ((("NVIDIA T4", T4, 100), 8),)
    config = SchedulingConfig(recent_shapes=lambda: WORKLOAD, card_counts=lambda: counts)
    plan = plan_pod(pod(container(gpu=1, pct=20, cores=20), annotations=annotations), config)
    assert plan is not None
    assert (plan.policies.workload, plan.policies.cards) == (WORKLOAD, counts)
    fgd = {"hami.io/gpu-scheduler-policy": "fgd"}
    plain = plan_pod(pod(container(gpu=1, pct=20, cores=20), annotations=fgd), config)
    assert plain is not None and plain.policies.cards == ()  # FGD does not weigh them


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(cards)
    assert result.failed == 0 and result.attempted > 0


def test_alike_nodes_are_fitted_once_and_the_chosen_one_gets_its_own_cards() -> None:
    ledger = Ledger()
    names = [f"n{i}" for i in range(4)]
    for name in names:
        ledger.set_node(name, [t4(f"GPU-{name}-{i}", i) for i in range(2)])
    asked = [*reversed(names)]  # the state is fitted on n3 first, and n0 wins by name
    for number, percent in enumerate((30, 50, 30, 80)):
        wanted = container(gpu=1, pct=percent, cores=percent)
        plan = plan_pod(pod(wanted, name=f"p{number}"), FGD)
        assert plan is not None
        decision = ledger.decide(plan, asked)
        exact = decide(plan, [ledger.view(name) for name in asked])
        assert isinstance(decision, Placement) and isinstance(exact, Placement)
        assert (decision.node, decision.grants) == (exact.node, exact.grants)
        assert all(g.uuid.startswith(f"GPU-{decision.node}-") for g in decision.grants[0])
        ledger.grant(plan.key, decision.node, decision.grants)


def test_forgetting_remembered_states_changes_no_answer() -> None:
    # three nodes whose free CPU keeps changing: past 1,024 states the remembered ones are
    # forgotten (memory's bound), which must change no decision
    config = SchedulingConfig(
        policies=PodPolicies(node=Policy.FGD, gpu=Policy.FGD),
        recent_shapes=lambda: CardWorkload(
            [(CardShape(1, memory_percent=50, cores=50, cpu=c), 1) for c in (2000, 5000, 9000)]
        ),
    )
    ledger = Ledger()
    names = ["a", "b", "c"]
    for name in names:
        ledger.set_node(name, [t4(f"GPU-{name}-{i}", i) for i in range(2)])
        ledger.set_host(name, HostResources(16_000, 65_536))
    rng = random.Random(7)
    for number in range(1500):
        ledger.charge_host("other", rng.choice(names), HostResources(rng.randrange(12_000), 0))
        percent = rng.choice((20, 40, 60))
        cpu = str(rng.randrange(6))
        wanted = container(gpu=1, pct=percent, cores=percent, cpu=cpu)
        plan = plan_pod(pod(wanted, name=f"p{number}"), config)
        assert plan is not None
        decision = ledger.decide(plan, names)
        exact = decide(plan, [ledger.view(name) for name in names])
        assert isinstance(decision, Placement) and isinstance(exact, Placement)
        assert (decision.node, decision.grants) == (exact.node, exact.grants), number
