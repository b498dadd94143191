"""`nvidia.com/vgpu-mode`: which registered card modes a pod accepts."""

import pytest

from tests.unit.domain.builders import card, container, pod
from vgpu.domain import Ledger, NoPlacement, Placement, SchedulingConfig, decide, plan_pod
from vgpu.domain.device import Device
from vgpu.domain.selectors import selector_from_annotations
from vgpu.domain.vendor import NVIDIA


def _card(mode: str) -> Device:
    return Device(uuid="GPU-a", index=0, type="NVIDIA A100", count=10, memory=40960, mode=mode)


@pytest.mark.parametrize(
    ("wanted", "mode", "accepted"),
    [
        (None, "hami-core", True),  # no annotation: a hami-core slice
        (None, "mps", False),
        ("hami-core", "hami-core", True),
        ("mps", "mps", True),
        ("hami-core,mps", "mps", True),
        ("hami-core", "", True),  # registered without a mode: suits every pod, as in HAMi
        ("mig", "", True),
        # a MIG-partitioned card takes only pods that ask for MIG instances (HAMi would also
        # put a pod that names no mode there, as a hami-core slice)
        (None, "mig", False),
        ("hami-core", "mig", False),
        ("mig", "mig", True),
        ("hami-core,mig", "mig", True),
        ("mig", "hami-core", False),
    ],
)
def test_a_card_suits_a_pod_by_its_mode(wanted: str | None, mode: str, accepted: bool) -> None:
    annotations = {} if wanted is None else {NVIDIA.mode_annotation: wanted}
    assert selector_from_annotations(annotations, NVIDIA).mode_ok(_card(mode)) is accepted


def test_a_slice_never_lands_on_a_mig_card_even_when_the_node_has_room() -> None:
    ledger = Ledger()
    ledger.set_node("mig-node", [card("GPU-mig", mode="mig")])
    ledger.set_node("shared", [card("GPU-shared", index=0)])
    plan = plan_pod(pod(container(gpu=1, mem=1000)), SchedulingConfig())
    assert plan is not None

    refused = decide(plan, [ledger.view("mig-node")])
    assert isinstance(refused, NoPlacement)
    assert "ModeNotFit" in refused.rejections["mig-node"].hami_reason
    placed = ledger.decide(plan)
    assert isinstance(placed, Placement) and placed.node == "shared"
