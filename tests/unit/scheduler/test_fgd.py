"""FGD in the live scheduler: chosen by config or per pod, weighing the shapes it has seen."""

import re
from pathlib import Path

import pytest

from tests.unit.scheduler.builders import World, gpu_node, manifest, world
from vgpu.app.scheduler.config import ConfigError, SchedulerConfig, load_config
from vgpu.domain import Policy
from vgpu.domain.fragmentation.cards import CardShape

# three in four pods take half a card, one in four a whole one
SEEDS = {
    "seed_shapes": [
        {"memory_percent": 50, "cores": 50, "weight": 3},
        {"memory_percent": 100, "cores": 100, "weight": 1},
    ]
}


def placed(w: World, name: str) -> tuple[str, str]:
    allocated = w.pod_annotations(name)["hami.io/vgpu-devices-allocated"]
    return w.pod_annotations(name)["hami.io/vgpu-node"], allocated.split(",")[0]


def test_fgd_by_config_places_where_least_is_stranded_for_the_seeded_shapes() -> None:
    w = world(
        gpu_node("a", cards=2),
        gpu_node("b", cards=2),
        node_policy="fgd",
        gpu_policy="fgd",
        fragmentation=SEEDS,
    )
    for name in ("p1", "p2"):
        result = w.filter(manifest(name, gpu=1, gpumem_percentage=30, gpucores=30), "a", "b")
        assert result.error == ""
    # p1: both nodes idle and alike: a (by name), card 0: (700, 1000) strands 700 for a whole
    # card, sigma(-0.175) -> 45. p2: on a's card 0 -> (400, 1000) strands 400 for halves and
    # the whole card: 44; on a's card 1 -> (700, 700) leaves no whole card: 45; on b: 45.
    # Equal scores go to a by name, on card 1 (where binpack would fill card 0, spread take b)
    assert placed(w, "p1") == ("a", "GPU-a-0")
    assert placed(w, "p2") == ("a", "GPU-a-1")


def test_a_pod_asks_for_fgd_by_annotation_under_a_binpack_cluster() -> None:
    window = {**SEEDS, "window": 4, "refresh": 1}  # pods seen soon outweigh the seeds
    w = world(gpu_node("a", cards=2), gpu_node("b", cards=2), fragmentation=window)
    shapes = w.container.shapes()
    fgd = {"hami.io/node-scheduler-policy": "fgd", "hami.io/gpu-scheduler-policy": "fgd"}
    w.filter(manifest("p1", gpu=1, gpumem_percentage=30, gpucores=30), "a", "b")
    w.filter(manifest("p2", annotations=fgd, gpu=1, gpumem_percentage=30, gpucores=30), "a", "b")
    w.filter(manifest("p3", gpu=1, gpumem_percentage=30, gpucores=30), "a", "b")
    # p1 (binpack/spread): a, card 0. p2 weighs p1's shape and the seeds (3 of 4 slots):
    # a's card 0 -> (400, 1000): 45; a's card 1 -> (700, 700): 46; b -> (700, 1000): 46
    assert placed(w, "p1") == ("a", "GPU-a-0")
    assert placed(w, "p2") == ("a", "GPU-a-1")
    assert placed(w, "p3") == ("a", "GPU-a-0")  # binpack/spread again: fullest node, even cards
    seen = CardShape(1, memory_percent=30, cores=30)
    assert shapes.current().shapes[0] == (seen, 3000)  # 3 of the 4 slots, in thousandths
    w.filter(manifest("p3", gpu=1, gpumem_percentage=30, gpucores=30), "a", "b")  # asked again
    assert shapes.current().shapes[0] == (seen, 3000)


def test_the_window_is_configured_with_named_errors(tmp_path: Path) -> None:
    config = SchedulerConfig.model_validate({"node_policy": "fgd", "gpu_policy": "fgd"})
    assert config.node_policy is Policy.FGD
    assert config.scheduling().policies.gpu is Policy.FGD
    path = tmp_path / "scheduler.yaml"
    path.write_text("fragmentation: {window: 0}\n")
    with pytest.raises(ConfigError, match=re.escape("fragmentation.window")):
        load_config(path)
    path.write_text("fragmentation: {seed_shapes: [{memory_percent: 150}]}\n")
    with pytest.raises(ConfigError, match=re.escape("fragmentation.seed_shapes[0].memory_percent")):
        load_config(path)
    path.write_text("node_policy: fgdd\n")
    with pytest.raises(ConfigError, match="node_policy"):
        load_config(path)
