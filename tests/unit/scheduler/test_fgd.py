"""FGD in the live scheduler: chosen by config or per pod, weighing the shapes it has seen."""

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.scheduler.builders import World, gpu_node, manifest, world
from vgpu.app.scheduler.config import ConfigError, SchedulerConfig, load_config
from vgpu.domain import NVIDIA, ClusterNode, Device, Policy, encode_node_devices
from vgpu.domain.fragmentation.cards import CardShape
from vgpu.domain.host import HostResources

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


# pods of the typical shape take half a card and 8 CPUs
CPU_BOUND = {"typical_shapes": [{"memory_percent": 50, "cores": 50, "cpu": 8}]}


def with_cpu(node: ClusterNode, cpu: str) -> ClusterNode:
    return replace(node, allocatable={"cpu": cpu, "memory": "64Gi"})


def test_fgd_weighs_the_cpu_left_on_nodes_by_every_pod_bound_there() -> None:
    w = world(
        with_cpu(gpu_node("a", cards=1), "10"),
        with_cpu(gpu_node("b", cards=1), "100"),
        node_policy="fgd",
        gpu_policy="fgd",
        fragmentation=CPU_BOUND,
    )
    w.add_pod(manifest("web", node="a", phase="Running", cpu="1500m"))  # no GPU: any scheduler
    half = {"gpu": 1, "gpumem_percentage": 50, "gpucores": 50, "cpu": "1"}
    w.filter(manifest("p1", **half), "a", "b")
    # on a, 7.5 CPUs would be left, too few for the typical shape: its other half card would
    # be stranded (score 37); on b nothing is (50)
    assert placed(w, "p1")[0] == "b"
    host = w.state.ledger.view("b").host
    assert host is not None and host.cpu == 99_000  # the reservation holds its CPU too
    w.cluster.delete_pod("default", "web")
    w.filter(manifest("p2", **half), "a", "b")
    assert placed(w, "p2")[0] == "a"  # 9 CPUs left there now: a and b alike, a by name


# pods of the typical shape take half a card and 8 GiB of host memory
MEMORY_BOUND = {"typical_shapes": [{"memory_percent": 50, "cores": 50, "host_memory": "8Gi"}]}


def with_memory(pod: dict[str, Any], memory: str) -> dict[str, Any]:
    pod["spec"]["containers"][0]["resources"]["requests"] = {"memory": memory}
    return pod


@pytest.mark.parametrize(("policy", "chosen"), [("fgd", "a"), ("fgd-balanced", "b")])
def test_fgd_balanced_weighs_the_host_memory_left_where_fgd_does_not(
    policy: str, chosen: str
) -> None:
    nodes = (gpu_node("a", cards=1), gpu_node("b", cards=1))
    w = world(
        replace(nodes[0], allocatable={"cpu": "100", "memory": "10Gi"}),
        replace(nodes[1], allocatable={"cpu": "100", "memory": "100Gi"}),
        node_policy=policy,
        gpu_policy=policy,
        fragmentation=MEMORY_BOUND,
    )
    w.filter(with_memory(manifest("p1", gpu=1, gpumem_percentage=50, gpucores=50), "4Gi"), "a", "b")
    # on a, 6 GiB would be left, too little for the typical shape: FGD-balanced counts the
    # other half card stranded there and takes b; FGD reads no memory: a and b alike, a by name
    assert placed(w, "p1")[0] == chosen


def typed_node(name: str, card_type: str, cards: int) -> ClusterNode:
    devices = [Device(f"GPU-{name}-{i}", i, card_type, 10, 24000) for i in range(cards)]
    return ClusterNode(name, {NVIDIA.register_annotation: encode_node_devices(devices)})


def test_fgd_balanced_keeps_pods_free_to_go_anywhere_off_the_cards_pinned_pods_need() -> None:
    # half the pods take half of any card, half a whole T4; the cluster has 2 T4 and 8 L4 cards
    shapes = [
        {"memory_percent": 50, "cores": 50},
        {"memory_percent": 100, "cores": 100, "gputype": "T4"},
    ]
    w = world(
        typed_node("a", "NVIDIA T4", 2),
        typed_node("b", "NVIDIA L4", 8),
        node_policy="fgd-balanced",
        gpu_policy="fgd-balanced",
        fragmentation={"typical_shapes": shapes},
    )
    on_t4 = {"nvidia.com/use-gputype": "T4"}
    half = {"gpu": 1, "gpumem_percentage": 50, "gpucores": 50}
    w.filter(manifest("p0", annotations=on_t4, **half), "a", "b")
    assert placed(w, "p0")[0] == "a"
    w.filter(manifest("p1", **half), "a", "b")
    # filling a's half card drops fragmentation as much as taking GPU on b the T4 shape cannot
    # use anyway (FGD: a tie, a by name); the T4 shape asks 2/3 of the GPU for 1/5 of the
    # cards, so FGD-balanced prices each T4 milli at 10/3 and takes b
    assert placed(w, "p1")[0] == "b"
    assert w.state.card_counts() == ((("NVIDIA L4", 24000, 100), 8), (("NVIDIA T4", 24000, 100), 2))


def test_a_finished_pod_gives_its_cpu_back_and_an_unreadable_allocatable_counts_as_enough(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(with_cpu(gpu_node("a", cards=1), "8"), with_cpu(gpu_node("b"), "lots"))
    w.add_pod(manifest("job", node="a", phase="Running", cpu="2"))
    assert w.state.ledger.view("a").host == HostResources(6000, 65536)
    w.add_pod(manifest("job", node="a", phase="Succeeded", cpu="2"))
    assert w.state.ledger.view("a").host == HostResources(8000, 65536)
    assert w.state.ledger.view("b").host is None
    assert "node b: node status.allocatable.cpu='lots'" in caplog.text


def test_the_window_learns_each_pods_cpu_and_given_shapes_replace_it() -> None:
    learned = world(gpu_node("a"), fragmentation={"window": 4, "refresh": 1})
    learned.filter(manifest("p1", gpu=1, gpumem_percentage=30, gpucores=30, cpu="2"), "a")
    shape = CardShape(1, memory_percent=30, cores=30, cpu=2000)
    assert learned.container.shapes().current().shapes == ((shape, 1000),)
    given = world(gpu_node("a"), fragmentation=CPU_BOUND)
    before = given.container.shapes().current()
    given.filter(manifest("p1", gpu=1, gpumem_percentage=30, gpucores=30, cpu="2"), "a")
    assert given.container.shapes().current() is before
    # weights in their lowest terms: a trace's shapes weigh its own counts
    assert before.shapes == ((CardShape(1, memory_percent=50, cores=50, cpu=8000), 1),)


def test_the_window_learns_the_mean_host_memory_of_pods_alike_but_for_it() -> None:
    learned = world(gpu_node("a", cards=8), fragmentation={"window": 4, "refresh": 1})
    for name, memory in (("p1", "1Gi"), ("p2", "3Gi"), ("p3", "5Gi")):
        pod = manifest(name, gpu=1, gpumem_percentage=30, gpucores=30, cpu="2")
        pod["spec"]["containers"][0]["resources"]["requests"] = {"memory": memory}
        learned.filter(pod, "a")
    shape = CardShape(1, memory_percent=30, cores=30, cpu=2000, host_memory=3072)
    assert learned.container.shapes().current().shapes == ((shape, 3000),)


def test_typical_shapes_come_from_a_trace_as_the_replay_takes_them(tmp_path: Path) -> None:
    trace = tmp_path / "pods.csv"
    trace.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        "p1,4000,100,1,460,\np2,4000,100,1,460,\np3,12000,100,2,1000,T4|P100\np4,32000,1,0,0,\n"
    )
    config = SchedulerConfig.model_validate({"fragmentation": {"typical_shapes_file": trace}})
    assert [s.model_dump() for s in config.fragmentation.given_shapes()] == [
        {"gpus": 1, "memory": 0, "memory_percent": 46, "cores": 46, "gputype": "", "cpu": 4000,
         "host_memory": 100, "weight": 2.0},
        {"gpus": 2, "memory": 0, "memory_percent": 100, "cores": 100, "gputype": "P100,T4",
         "cpu": 12000, "host_memory": 100, "weight": 1.0},
        {"gpus": 0, "memory": 0, "memory_percent": 1, "cores": 0, "gputype": "", "cpu": 32000,
         "host_memory": 1, "weight": 1.0},
    ]


@pytest.mark.parametrize(
    ("fragmentation", "field"),
    [
        ({"typical_shapes": [{"cpu": "lots"}]}, "fragmentation.typical_shapes[0].cpu"),
        ({"typical_shapes": [{"host_memory": "-1Gi"}]}, "typical_shapes[0].host_memory"),
        ({"seed_shapes": [{"host_memory": "lots"}]}, "fragmentation.seed_shapes[0].host_memory"),
        ({"typical_shapes": [{"gpus": 65}]}, "fragmentation.typical_shapes[0].gpus"),
        ({"seed_shapes": [{"gpus": 0}]}, "fragmentation.seed_shapes[0].gpus"),
        (
            {"seed_shapes": [{"gpus": 1}], "typical_shapes": [{"gpus": 1}]},
            "give one of seed_shapes and typical_shapes",
        ),
        ({"typical_shapes_file": "/nonexistent/pods.csv"}, "typical_shapes_file: pods.csv"),
    ],
)
def test_bad_typical_shapes_are_refused_naming_them(
    fragmentation: dict[str, object], field: str, tmp_path: Path
) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(json.dumps({"fragmentation": fragmentation}))
    with pytest.raises(ConfigError, match=re.escape(field)):
        load_config(path)


def test_fgd_balanced_prioritize_in_combined_mode_ranks_first_the_node_its_filter_picks() -> None:
    nodes = (gpu_node("a", cards=1), gpu_node("b", cards=1))
    w = world(
        replace(nodes[0], allocatable={"cpu": "100", "memory": "10Gi"}),
        replace(nodes[1], allocatable={"cpu": "100", "memory": "100Gi"}),
        node_policy="fgd-balanced",
        gpu_policy="fgd-balanced",
        fragmentation=MEMORY_BOUND,
        combine_scores=True,
    )
    pod = with_memory(manifest("p1", gpu=1, gpumem_percentage=50, gpucores=50), "4Gi")
    scores = dict(w.service.prioritize(pod, ["a", "b"], None).scores)
    assert scores["b"] > scores["a"] > 0  # as in single-node mode: a's last 6 GiB strand a card
