"""`nvidia.com/vgpu-mode`: which registered card modes a pod accepts."""

import pytest

from vgpu.domain.device import Device
from vgpu.domain.selectors import selector_from_annotations
from vgpu.domain.vendor import NVIDIA


def _card(mode: str) -> Device:
    return Device(uuid="GPU-a", index=0, type="NVIDIA A100", count=10, memory=40960, mode=mode)


@pytest.mark.parametrize(
    ("wanted", "mode", "accepted"),
    [
        (None, "mig", True),  # no annotation: any mode
        ("hami-core", "hami-core", True),
        ("hami-core", "mig", False),
        ("mig", "mig", True),
        ("hami-core,mig", "mig", True),
        ("hami-core", "", True),  # registered without a mode: suits every pod, as in HAMi
        ("mig", "", True),
    ],
)
def test_a_card_suits_a_pod_by_its_mode(wanted: str | None, mode: str, accepted: bool) -> None:
    annotations = {} if wanted is None else {NVIDIA.mode_annotation: wanted}
    assert selector_from_annotations(annotations, NVIDIA).mode_ok(_card(mode)) is accepted
