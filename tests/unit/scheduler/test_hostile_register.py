"""A node whose register annotation names a card id with a grant separator, or one id twice,
is unusable with its reason logged; other nodes keep scheduling (issue 8, item 9)."""

import json

import pytest

from tests.unit.scheduler.builders import a40_node, manifest, world
from vgpu.domain import NVIDIA, ClusterNode


def _register(*ids: str) -> str:
    return json.dumps([{"id": i, "count": 10, "devmem": 46068, "health": True} for i in ids])


@pytest.mark.parametrize(
    ("ids", "why"),
    [
        (("GPU-x,NVIDIA,46068,100:GPU-y", "GPU-z"), "contains ','"),
        (("GPU-x", "GPU-x"), "card id 'GPU-x' is already listed as device #0"),
    ],
)
def test_a_node_with_hostile_card_ids_is_unusable_and_others_are_not(
    ids: tuple[str, ...], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    hostile = ClusterNode("hostile", {NVIDIA.register_annotation: _register(*ids)})
    w = world(hostile, a40_node("node1"))

    result = w.filter(manifest("p", gpu=1, gpumem=1000), "hostile", "node1")

    assert result.node_names == ["node1"]
    assert why in result.failed["hostile"]
    problem = w.state.node_problem("hostile")
    assert problem is not None and why in problem
    assert f"node hostile is not usable: annotation {NVIDIA.register_annotation}" in caplog.text
    assert w.pod_annotations("p")["hami.io/vgpu-node"] == "node1"
