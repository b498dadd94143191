"""Dynamic MIG on the scheduler side: which profile and placement a pod that names `mig` gets,
what the grant charges, and how the ledger keeps instances from overlapping (docs/protocol.md#mig-instance-choice)."""

import doctest
from types import ModuleType
from typing import Any

import pytest

from tests.unit.domain.builders import card, container, mig_card, pod
from vgpu.domain import (
    ContainerRequest,
    DeviceGrant,
    Ledger,
    LedgerError,
    MigPlacement,
    MigSlot,
    NodeView,
    NoPlacement,
    Placement,
    PodPlan,
    Reason,
    SchedulingConfig,
    Usage,
    decide,
    fit_pod,
    initrelease,
    mig_choice,
    plan_pod,
)
from vgpu.domain.errors import CodecError
from vgpu.domain.fit import NodeFit
from vgpu.domain.initrelease import InitProgress, pod_hold
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION, allocations, choice, grants, profiles
from vgpu.domain.vendor import NVIDIA

MIG = {NVIDIA.mode_annotation: "mig"}


def mig_plan(*containers: dict[str, Any], annotations: dict[str, str] | None = None) -> PodPlan:
    plan = plan_pod(
        pod(*containers, annotations=MIG if annotations is None else annotations),
        SchedulingConfig(),
    )
    assert plan is not None
    return plan


def slot(profile: str, start: int, size: int) -> MigSlot:
    return MigSlot(profile, MigPlacement(start, size))


def granted(ledger: Ledger, key: str, *slots: MigSlot, strict: bool = True) -> list[str]:
    """Record a pod holding these instances on GPU-mig of node n."""
    grants = tuple(DeviceGrant("GPU-mig", "NVIDIA", 1, 1, s) for s in slots)
    return ledger.grant(key, "n", (grants,), strict=strict)


def mig_ledger(*cards: Any) -> Ledger:
    ledger = Ledger()
    ledger.set_node("n", list(cards) or [mig_card()])
    return ledger


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (9000, slot("1g.10gb", 6, 1)),  # smallest that holds it
        (9856, slot("1g.10gb", 6, 1)),  # exactly the profile's memory
        (12000, slot("2g.20gb", 0, 2)),
        (30000, slot("3g.40gb", 4, 4)),  # 3g and 4g hold 40192 MiB: fewer slices wins
        (50000, slot("7g.80gb", 0, 8)),
        (81000, None),  # the card has the memory, no profile has
    ],
)
def test_the_smallest_profile_that_holds_the_request_is_chosen(
    memory: int, expected: MigSlot | None
) -> None:
    assert mig_choice(ContainerRequest(1, memory=memory), mig_card()) == expected


def test_a_percentage_request_resolves_against_the_cards_memory() -> None:
    # 25 % of 81920 MiB is 20480: more than 2g.20gb's 19968 MiB
    request = ContainerRequest(1, memory=0, memory_percent=25)
    assert mig_choice(request, mig_card()) == slot("3g.40gb", 4, 4)


def test_1g_and_3g_instances_fill_from_the_top_others_from_the_bottom() -> None:
    ledger = mig_ledger()
    taken = []
    for step, memory in enumerate((9000, 9000, 12000, 12000, 9000)):
        decision = ledger.decide(mig_plan(container(gpu=1, mem=memory)))
        assert isinstance(decision, Placement)
        (grant,) = decision.grants[0]
        assert grant.mig is not None
        taken.append((grant.mig.profile, grant.mig.placement.start))
        ledger.grant(f"default/p{step}", "n", decision.grants)
    assert taken == [("1g.10gb", 6), ("1g.10gb", 5), ("2g.20gb", 0), ("2g.20gb", 2), ("1g.10gb", 4)]


def test_the_grant_charges_the_profiles_memory_and_cores_and_one_slice() -> None:
    ledger = mig_ledger()
    plan = mig_plan(container(gpu=1, mem=9000))
    decision = ledger.decide(plan)
    assert isinstance(decision, Placement)
    assert decision.grants == (
        (DeviceGrant("GPU-mig", "NVIDIA", 9856, 15, slot("1g.10gb", 6, 1)),),
    )
    ledger.grant(plan.key, "n", decision.grants)
    assert ledger.usage("n", "GPU-mig") == Usage(1, 9856, 15, mig=0b0100_0000)


def test_free_memory_without_a_free_placement_is_rejected_as_mig_topology() -> None:
    ledger = mig_ledger(mig_card("GPU-mig"), mig_card("GPU-mig2", 1))
    for start in (1, 3, 5):  # every other slice taken: 52352 MiB free, no two slices side by side
        for uuid in ("GPU-mig", "GPU-mig2"):
            one = DeviceGrant(uuid, "NVIDIA", 9856, 15, slot("1g.10gb", start, 1))
            ledger.grant(f"default/{uuid}-{start}", "n", ((one,),))
    decision = decide(mig_plan(container(gpu=1, mem=12000)), [ledger.view("n")])
    assert isinstance(decision, NoPlacement)
    rejection = decision.rejections["n"]
    assert rejection.reason is Reason.MIG_TOPOLOGY
    assert rejection.hami_reason == "2/2 CardMigTopologyInfeasible"
    assert "2 no free MIG placement" in rejection.message
    # a 1g instance still fits, on a free slice from the top
    fits = ledger.decide(mig_plan(container(gpu=1, mem=9000)))
    assert isinstance(fits, Placement)
    assert fits.grants[0][0].mig == slot("1g.10gb", 6, 1)


@pytest.mark.parametrize("annotations", [{}, {NVIDIA.mode_annotation: "hami-core"}])
def test_a_pod_that_does_not_name_mig_never_gets_a_mig_card(annotations: dict[str, str]) -> None:
    plan = mig_plan(container(gpu=1, mem=1000), annotations=annotations)
    decision = decide(plan, [mig_ledger().view("n")])
    assert isinstance(decision, NoPlacement)
    assert decision.rejections["n"].hami_reason == "1/1 ModeNotFit"


def test_a_mig_pod_never_gets_a_hami_core_slice() -> None:
    ledger = mig_ledger(card("GPU-shared"), mig_card(index=1))
    decision = ledger.decide(mig_plan(container(gpu=1, mem=1000)))
    assert isinstance(decision, Placement)
    assert [g.uuid for g in decision.grants[0]] == ["GPU-mig"]
    only_shared = NodeView("s", (card("GPU-shared"),), {})
    refused = decide(mig_plan(container(gpu=1, mem=1000)), [only_shared])
    assert isinstance(refused, NoPlacement)
    assert refused.rejections["s"].hami_reason == "1/1 ModeNotFit"


def test_a_pod_accepting_both_modes_gets_a_plain_slice_on_a_shared_card() -> None:
    both = {NVIDIA.mode_annotation: "hami-core,mig"}
    view = NodeView("s", (card("GPU-shared"),), {})
    decision = decide(mig_plan(container(gpu=1, mem=1000), annotations=both), [view])
    assert isinstance(decision, Placement)
    assert decision.grants == ((DeviceGrant("GPU-shared", "NVIDIA", 1000, 0),),)


def test_the_ledger_refuses_overlapping_instances_and_frees_them_on_release() -> None:
    ledger = mig_ledger()
    granted(ledger, "default/a", slot("1g.10gb", 6, 1))
    with pytest.raises(LedgerError, match="would share MIG slices 0b1000000"):
        granted(ledger, "default/b", slot("3g.40gb", 4, 4))
    assert ledger.allocation("default/b") is None
    assert ledger.usage("n", "GPU-mig").mig == 0b0100_0000
    ledger.release("default/a")
    assert ledger.usage("n", "GPU-mig") == Usage()
    assert granted(ledger, "default/b", slot("3g.40gb", 4, 4)) == []


def test_a_reported_overlap_is_kept_and_releasing_one_side_keeps_the_other() -> None:
    ledger = mig_ledger()
    granted(ledger, "default/a", slot("1g.10gb", 6, 1))
    problems = granted(ledger, "default/b", slot("3g.40gb", 4, 4), strict=False)
    assert problems and "would share MIG slices" in problems[0]
    ledger.release("default/b")
    assert ledger.usage("n", "GPU-mig").mig == 0b0100_0000  # a's instance is still there
    assert ledger.view("n", exclude_pod="default/a").usage == {}


def test_a_mig_instance_on_a_card_not_in_mig_mode_is_refused_strictly() -> None:
    ledger = mig_ledger(card("GPU-mig"))  # same uuid, registered in hami-core mode
    with pytest.raises(LedgerError, match="not mig, but would get a MIG instance"):
        granted(ledger, "default/a", slot("1g.10gb", 6, 1))


def test_a_slice_without_an_instance_on_a_mig_card_takes_the_whole_card() -> None:
    ledger = mig_ledger()
    plain = DeviceGrant("GPU-mig", "NVIDIA", 1000, 0)
    with pytest.raises(LedgerError, match="names no MIG instance"):
        ledger.grant("default/old", "n", ((plain,),))
    problems = ledger.grant("default/old", "n", ((plain,),), strict=False)
    assert problems and "the whole card counts as taken" in problems[0]
    refused = ledger.decide(mig_plan(container(gpu=1, mem=1000)))
    assert isinstance(refused, NoPlacement)
    assert refused.rejections["n"].reason is Reason.MIG_TOPOLOGY
    ledger.release("default/old")
    assert isinstance(ledger.decide(mig_plan(container(gpu=1, mem=1000))), Placement)


def test_init_container_instances_last_as_long_as_the_pod() -> None:
    """The device plugin keeps every instance of a pod until it ends: an app container never
    gets the slices of an init container's instance, even after the init container is done."""
    plan = mig_plan(container("setup", init=True, gpu=1, mem=9000), container(gpu=1, mem=9000))
    fit = fit_pod(plan, mig_ledger().view("n"))
    assert isinstance(fit, NodeFit)
    init_grant, app_grant = fit.grants[0][0], fit.grants[1][0]
    assert (init_grant.mig, app_grant.mig) == (slot("1g.10gb", 6, 1), slot("1g.10gb", 5, 1))
    done = pod_hold(fit.grants, InitProgress(count=1, finished=True))
    assert done["GPU-mig"].mig == 0b0110_0000


def _reported(reservations: str, allocated: str = "GPU-mig,NVIDIA,19968,29:;") -> Any:
    annotations = {
        "hami.io/vgpu-node": "n",
        NVIDIA.allocated_annotation: allocated,
        MIG_ALLOCATIONS_ANNOTATION: reservations,
    }
    return pod(container(gpu=1, mem=12000), name="seen", annotations=annotations)


def _reservation(uuid: str = "GPU-mig", container: int = 0, start: int = 2, device: int = 0) -> str:
    return (
        f'[{{"containerIndex":{container},"deviceIndex":{device},"gpuUUID":"{uuid}",'
        f'"profile":"2g.20gb","placement":{{"start":{start},"size":2}},'
        '"migUUID":"MIG-1","gpuInstanceID":5,"computeInstanceID":0}]'
    )


def test_a_rebuild_reads_the_instances_back_from_the_pods() -> None:
    ledger = mig_ledger()
    assert ledger.record_pod(_reported(_reservation()), NVIDIA) == []
    assert ledger.usage("n", "GPU-mig") == Usage(1, 19968, 29, mig=0b1100)
    (grant,) = ledger.allocation("default/seen").grants[0]  # type: ignore[union-attr]
    assert grant.mig == slot("2g.20gb", 2, 2)
    decision = ledger.decide(mig_plan(container(gpu=1, mem=12000)))
    assert isinstance(decision, Placement)
    assert decision.grants[0][0].mig == slot("2g.20gb", 0, 2)


@pytest.mark.parametrize(
    ("reservations", "problem"),
    [
        (_reservation(uuid="GPU-other"), "gpuUUID GPU-other is not the granted card GPU-mig"),
        (_reservation(container=1), "container 1 device 0 has no grant"),
        (_reservation(start=70), "past any GPU"),
        ("[{", "invalid JSON"),
    ],
)
def test_reservations_that_disagree_with_the_device_list_are_not_counted(
    reservations: str, problem: str
) -> None:
    ledger = mig_ledger()
    with pytest.raises(CodecError, match=problem):
        ledger.record_pod(_reported(reservations), NVIDIA)
    assert ledger.pods() == []


def test_two_reservations_of_one_pod_on_the_same_slices_are_not_counted() -> None:
    both = _reservation()[:-1] + "," + _reservation(start=3, container=1)[1:]
    twice = "GPU-mig,NVIDIA,19968,29:;GPU-mig,NVIDIA,19968,29:;"
    ledger = mig_ledger()
    with pytest.raises(CodecError, match=r"entry #1: placement .* overlaps another instance"):
        ledger.record_pod(_reported(both, twice), NVIDIA)
    assert ledger.pods() == []


def test_a_rebuilt_instance_on_a_card_no_longer_in_mig_mode_still_counts() -> None:
    ledger = mig_ledger(card("GPU-mig"))
    problems = ledger.record_pod(_reported(_reservation()), NVIDIA)
    assert problems and "not mig, but would get a MIG instance" in problems[0]
    assert ledger.usage("n", "GPU-mig").slices == 1


@pytest.mark.parametrize("module", [profiles, choice, grants, allocations, initrelease])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_seven_1g_instances_fill_a_card_although_their_cores_add_up_past_100() -> None:
    ledger = mig_ledger()
    for step in range(7):
        decision = ledger.decide(mig_plan(container(gpu=1, mem=9000)))
        assert isinstance(decision, Placement), decision
        ledger.grant(f"default/p{step}", "n", decision.grants)
    assert ledger.usage("n", "GPU-mig") == Usage(7, 7 * 9856, 105, mig=0b0111_1111)
    full = ledger.decide(mig_plan(container(gpu=1, mem=1000)))
    assert isinstance(full, NoPlacement)
    assert full.rejections["n"].hami_reason == "1/1 CardTimeSlicingExhausted"


def test_profiles_larger_than_the_registered_memory_still_make_a_valid_grant() -> None:
    """A register whose profiles add up to more than `devmem` (odd, but it is what the node
    says): the grant the fit makes is one the ledger records."""
    ledger = mig_ledger(mig_card(memory=16000))
    plan = mig_plan(container(gpu=1, mem=12000))
    decision = ledger.decide(plan)
    assert isinstance(decision, Placement)
    assert decision.grants[0][0].memory == 19968
    assert ledger.grant(plan.key, "n", decision.grants) == []
