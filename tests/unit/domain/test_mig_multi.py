"""Several MIG devices of one container on one card (docs/protocol.md#mig-instance-choice, "several devices in one
container"): the fit may choose a MIG card again for the container's next device, `nvidia.com/gpu`
may exceed the node's cards, the grant names the card once per instance and reads back only
with reservations that tell the instances apart."""

import doctest
from typing import Any

import pytest

from tests.unit.domain.builders import card, container, mig_card, pod
from vgpu.domain import (
    Budget,
    DeviceGrant,
    Ledger,
    LedgerError,
    MigPlacement,
    MigSlot,
    NodeView,
    NoPlacement,
    Placement,
    PodGrants,
    PodPlan,
    Reason,
    SchedulingConfig,
    Usage,
    decide,
    decode_pod_grants,
    encode_pod_grants,
    plan_pod,
)
from vgpu.domain import grant as grant_module
from vgpu.domain.errors import CodecError
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION, MigReservation, encode_mig_allocations
from vgpu.domain.mig.grants import decode_granted, mig_reservations
from vgpu.domain.vendor import NVIDIA

MIG = {NVIDIA.mode_annotation: "mig"}
ONE_G = 9856  # the A100-80GB's 1g.10gb memory


def mig_plan(*containers: dict[str, Any], **annotations: str) -> PodPlan:
    plan = plan_pod(pod(*containers, annotations={**MIG, **annotations}), SchedulingConfig())
    assert plan is not None
    return plan


def slot(profile: str, start: int, size: int = 1) -> MigSlot:
    return MigSlot(profile, MigPlacement(start, size))


def placed(decision: Any) -> list[tuple[str, str, int]]:
    """(card, profile, start) of each device of the pod, in grant order."""
    assert isinstance(decision, Placement), decision
    return [
        (g.uuid, g.mig.profile, g.mig.placement.start)
        for c in decision.grants
        for g in c
        if g.mig is not None
    ]


def ledger_of(*cards: Any) -> Ledger:
    ledger = Ledger()
    ledger.set_node("n", list(cards))
    return ledger


def one_g(uuid: str, *starts: int) -> tuple[DeviceGrant, ...]:
    return tuple(DeviceGrant(uuid, "NVIDIA", ONE_G, 15, slot("1g.10gb", s)) for s in starts)


# the fit -----------------------------------------------------------------------------------


def test_two_devices_of_one_container_share_the_only_mig_card() -> None:
    ledger = ledger_of(mig_card())
    decision = ledger.decide(mig_plan(container(gpu=2, mem=9000)))
    assert placed(decision) == [("GPU-mig", "1g.10gb", 6), ("GPU-mig", "1g.10gb", 5)]


def test_a_container_may_ask_more_devices_than_the_node_has_cards() -> None:
    ledger = ledger_of(mig_card())
    plan = mig_plan(container(gpu=3, mem=12000))
    decision = ledger.decide(plan)
    assert placed(decision) == [("GPU-mig", "2g.20gb", s) for s in (0, 2, 4)]
    assert isinstance(decision, Placement)
    assert ledger.grant(plan.key, "n", decision.grants) == []
    assert ledger.usage("n", "GPU-mig") == Usage(3, 3 * 19968, 3 * 29, mig=0b11_1111)


def test_spread_fills_the_emptiest_card_first() -> None:
    ledger = ledger_of(mig_card("GPU-a"), mig_card("GPU-b", 1))
    ledger.grant("default/other", "n", (one_g("GPU-a", 6),))
    decision = ledger.decide(mig_plan(container(gpu=2, mem=9000)))  # spread: HAMi's default
    assert placed(decision) == [("GPU-b", "1g.10gb", 6), ("GPU-b", "1g.10gb", 5)]


def test_binpack_fills_the_fullest_card_before_the_next_one() -> None:
    ledger = ledger_of(mig_card("GPU-a"), mig_card("GPU-b", 1))
    ledger.grant("default/other", "n", (one_g("GPU-a", 6, 5, 4, 3, 2),))  # GPU-a: 0, 1 free
    binpack = {"hami.io/gpu-scheduler-policy": "binpack"}
    decision = ledger.decide(mig_plan(container(gpu=3, mem=9000), **binpack))
    # binpack puts the fuller GPU-a first; it takes two before GPU-b gets the third
    assert placed(decision) == [
        ("GPU-a", "1g.10gb", 1),
        ("GPU-a", "1g.10gb", 0),
        ("GPU-b", "1g.10gb", 6),
    ]


def test_the_second_container_sees_the_first_ones_instances_on_the_card() -> None:
    plan = mig_plan(container("a", gpu=2, mem=9000), container("b", gpu=2, mem=9000))
    decision = ledger_of(mig_card()).decide(plan)
    assert [start for _, _, start in placed(decision)] == [6, 5, 4, 3]


def test_more_devices_than_free_placements_is_refused_for_want_of_a_placement() -> None:
    ledger = ledger_of(mig_card())
    decision = ledger.decide(mig_plan(container(gpu=8, mem=9000)))  # seven 1g placements
    assert isinstance(decision, NoPlacement)
    assert decision.rejections["n"].reason is Reason.MIG_TOPOLOGY
    # as HAMi counts it: seven devices held, then the card's eighth look finds no placement
    assert decision.rejections["n"].hami_reason == (
        "1/1 CardMigTopologyInfeasible, 7/1 AllocatedCardsInsufficientRequest"
    )


@pytest.mark.parametrize(
    ("annotations", "devices"),
    [
        ({}, (card("GPU-shared"),)),  # a shared card takes one slice per container
        (MIG, (card("GPU-shared"),)),  # a MIG pod on a node without MIG cards
    ],
)
def test_only_mig_cards_let_a_container_ask_more_devices_than_cards(
    annotations: dict[str, str], devices: tuple[Any, ...]
) -> None:
    plan = plan_pod(pod(container(gpu=2, mem=1000), annotations=annotations), SchedulingConfig())
    assert plan is not None
    decision = decide(plan, [NodeView("n", devices, {})])
    assert isinstance(decision, NoPlacement)
    assert decision.rejections["n"].reason is Reason.NOT_ENOUGH_CARDS


def test_a_shared_card_is_never_taken_twice_by_one_container() -> None:
    both = {NVIDIA.mode_annotation: "hami-core,mig"}
    plan = plan_pod(pod(container(gpu=2, mem=1000), annotations=both), SchedulingConfig())
    assert plan is not None
    decision = decide(plan, [NodeView("n", (card("GPU-s"), card("GPU-t", 1)), {})])
    assert isinstance(decision, Placement)
    assert [g.uuid for g in decision.grants[0]] == ["GPU-s", "GPU-t"]


def test_the_quota_bounds_the_instances_a_container_takes_on_one_card() -> None:
    view = ledger_of(mig_card()).view("n")
    decision = decide(mig_plan(container(gpu=2, mem=9000)), [view], Budget(memory=15000))
    assert isinstance(decision, NoPlacement)
    assert "ResourceQuotaNotFit" in decision.rejections["n"].hami_reason


def test_a_mutex_pod_may_take_several_instances_of_the_idle_card_it_gets() -> None:
    """HAMi judges exclusivity once per card and container: the container's own instances do
    not make the card busy for its next device."""
    plan = mig_plan(container(gpu=2, mem=9000), **{"hami.io/gpu-scheduler-policy": "mutex"})
    assert placed(ledger_of(mig_card()).decide(plan)) == [
        ("GPU-mig", "1g.10gb", 6),
        ("GPU-mig", "1g.10gb", 5),
    ]


def test_topology_aware_gives_each_device_its_own_card_while_there_are_enough() -> None:
    policy = {"hami.io/gpu-scheduler-policy": "topology-aware"}
    two_cards = ledger_of(mig_card("GPU-a"), mig_card("GPU-b", 1))
    plan = mig_plan(container(gpu=2, mem=9000), **policy)
    assert sorted(u for u, _, _ in placed(two_cards.decide(plan))) == ["GPU-a", "GPU-b"]
    one_card = ledger_of(mig_card())
    assert len(placed(one_card.decide(mig_plan(container(gpu=2, mem=9000), **policy)))) == 2


# the ledger --------------------------------------------------------------------------------


def test_the_strict_ledger_refuses_a_pods_own_instances_that_overlap() -> None:
    ledger = ledger_of(mig_card())
    overlapping = (
        DeviceGrant("GPU-mig", "NVIDIA", ONE_G, 15, slot("1g.10gb", 2)),
        DeviceGrant("GPU-mig", "NVIDIA", 19968, 29, slot("2g.20gb", 2, 2)),
    )
    with pytest.raises(LedgerError, match=r"device #1 would share MIG slices 0b100 .* of the pod"):
        ledger.grant("default/p", "n", (overlapping,))
    assert ledger.allocation("default/p") is None
    assert ledger.usage("n", "GPU-mig") == Usage()


def test_two_instances_on_one_card_sum_their_charge_and_join_their_slices() -> None:
    ledger = ledger_of(mig_card())
    assert ledger.grant("default/p", "n", (one_g("GPU-mig", 6, 0),)) == []
    assert ledger.usage("n", "GPU-mig") == Usage(2, 2 * ONE_G, 30, mig=0b100_0001)
    ledger.release("default/p")
    assert ledger.usage("n", "GPU-mig") == Usage()


# the wire ----------------------------------------------------------------------------------

TWICE = "GPU-mig,NVIDIA,9856,15:GPU-mig,NVIDIA,9856,15:;"


def reserved(*entries: tuple[int, int, str, int, int]) -> tuple[MigReservation, ...]:
    """(container, device, card, start, size) of each reservation, profile `1g.10gb`."""
    return tuple(
        MigReservation(c, d, uuid, "1g.10gb", MigPlacement(start, size))
        for c, d, uuid, start, size in entries
    )


def test_a_card_repeats_in_a_container_when_each_appearance_has_its_own_instance() -> None:
    two: PodGrants = (one_g("GPU-mig", 6, 5),)
    text = encode_pod_grants(two)
    assert text == TWICE
    assert decode_granted(text, mig_reservations(two)) == two


@pytest.mark.parametrize(
    ("text", "reservations", "problem"),
    [
        pytest.param(
            "GPU-a,NVIDIA,100,0:GPU-a,NVIDIA,100,0:;",
            (),
            "container #0, card #1: card id 'GPU-a' is already listed as container #0, card #0",
            id="a hami-core card twice",
        ),
        pytest.param(
            TWICE,
            reserved((0, 0, "GPU-mig", 6, 1)),
            "card #1: card id 'GPU-mig' is already listed",
            id="one reservation for two appearances",
        ),
        pytest.param(
            TWICE,
            reserved((0, 1, "GPU-mig", 6, 1)),
            "card #1: card id 'GPU-mig' is already listed",
            id="the first appearance unreserved",
        ),
        pytest.param(
            TWICE,
            reserved((0, 0, "GPU-mig", 4, 2), (0, 1, "GPU-mig", 5, 1)),
            "card #1: card id 'GPU-mig' is already listed as container #0, card #0, and their "
            "MIG reservations overlap",
            id="two reservations overlapping",
        ),
        pytest.param(
            TWICE,
            reserved((0, 0, "GPU-mig", 6, 1), (0, 1, "GPU-other", 5, 1)),
            "card #1: card id 'GPU-mig' is already listed",
            id="a reservation on another card",
        ),
        pytest.param(
            TWICE,
            reserved((1, 0, "GPU-mig", 6, 1), (1, 1, "GPU-mig", 5, 1)),
            "card #1: card id 'GPU-mig' is already listed",
            id="the reservations are another container's",
        ),
    ],
)
def test_a_repeat_without_instances_of_its_own_is_refused(
    text: str, reservations: tuple[MigReservation, ...], problem: str
) -> None:
    with pytest.raises(CodecError, match=problem):
        decode_pod_grants(text, mig=reservations)


def test_the_device_plugin_reading_reservations_for_to_allocate_need_not_attach_them() -> None:
    """`to-allocate` empties served containers, so reservations of other containers name
    positions it no longer has; they only permit the repeats."""
    reservations = reserved((0, 0, "GPU-x", 6, 1), (1, 0, "GPU-mig", 6, 1), (1, 1, "GPU-mig", 5, 1))
    left = decode_pod_grants(";" + TWICE, mig=reservations)
    assert [g.uuid for g in left[1]] == ["GPU-mig", "GPU-mig"]


def test_a_rebuild_counts_both_instances_of_a_container_on_one_card() -> None:
    ledger = ledger_of(mig_card())
    reservations = reserved((0, 0, "GPU-mig", 6, 1), (0, 1, "GPU-mig", 5, 1))
    annotations = {
        "hami.io/vgpu-node": "n",
        NVIDIA.allocated_annotation: TWICE,
        MIG_ALLOCATIONS_ANNOTATION: encode_mig_allocations(reservations),
    }
    seen = pod(container(gpu=2, mem=9000), name="seen", annotations=annotations)
    assert ledger.record_pod(seen, NVIDIA) == []
    assert ledger.usage("n", "GPU-mig") == Usage(2, 2 * ONE_G, 30, mig=0b110_0000)
    assert placed(ledger.decide(mig_plan(container(gpu=1, mem=9000)))) == [
        ("GPU-mig", "1g.10gb", 4)
    ]


def test_a_rebuild_of_a_repeat_without_its_reservations_counts_nothing() -> None:
    ledger = ledger_of(mig_card())
    annotations = {"hami.io/vgpu-node": "n", NVIDIA.allocated_annotation: TWICE}
    seen = pod(container(gpu=2, mem=9000), name="seen", annotations=annotations)
    with pytest.raises(CodecError, match="already listed"):
        ledger.record_pod(seen, NVIDIA)
    assert ledger.pods() == []


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(grant_module)
    assert result.attempted > 0
    assert result.failed == 0
