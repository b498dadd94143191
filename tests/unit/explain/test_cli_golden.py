"""`vgpu explain` offline (`--fake-cluster`, `-f`): the whole human report, compared with
golden files for a saturated cluster, a quota-blocked pod, a type mismatch and a pod that fits."""

import json
from pathlib import Path

import pytest

from vgpu.app.cli import main

CASES = Path(__file__).parent / "cases"


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("pod", "cluster", "golden", "status"),
    [
        ("saturated-pod", "saturated-cluster", "saturated", 1),
        ("quota-pod", "quota-cluster", "quota", 1),
        ("type-pod", "type-cluster", "type", 1),
        ("quota-pod", "type-cluster", "fits", 0),
    ],
)
def test_the_report_matches_its_golden_file(
    capsys: pytest.CaptureFixture[str], pod: str, cluster: str, golden: str, status: int
) -> None:
    code, out, err = explain(
        capsys, "-f", str(CASES / f"{pod}.yaml"), "--fake-cluster", str(CASES / f"{cluster}.yaml")
    )
    assert (code, err) == (status, "")
    assert out == (CASES / f"{golden}.golden").read_text()


def test_json_carries_every_node_the_groups_and_the_suggestions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = explain(
        capsys,
        "-f",
        str(CASES / "saturated-pod.yaml"),
        "--fake-cluster",
        str(CASES / "saturated-cluster.yaml"),
        "--json",
    )
    report = json.loads(out)
    assert code == 1 and report["fits"] is False and report["placement"] is None
    assert report["held"] is None  # a pod not created yet is nowhere
    assert [n["node"] for n in report["nodes"]] == ["cpu-1", "gpu-1", "gpu-2", "gpu-3"]
    assert {g["reason"]: g["count"] for g in report["groups"]} == {
        "CardInsufficientMemory": 2,
        "CardTimeSlicingExhausted": 1,
        "NodeUnregistered": 1,
    }
    changes = {s["change"]: s for s in report["suggestions"]}
    assert changes["memory"]["value"] == 10068 and changes["memory"]["node"] == "gpu-2"
    assert changes["wait"]["value"] == ["ml/small-1"]


def test_a_pod_named_in_the_cluster_file_is_explained(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = explain(
        capsys, "ml/train-2", "--fake-cluster", str(CASES / "saturated-cluster.yaml")
    )
    # It holds its own grant: explaining it must not count that grant against it.
    assert code == 0
    assert out.startswith(
        "pod ml/train-2: runs on gpu-1 and holds cards GPU-1b 30000 MiB 50% cores\n"
        "  if it were scheduled again now, it fits on 1/4 nodes; the scheduler would choose gpu-1\n"
    )


# gpu-1's only card has shrunk under the pod that runs there; a second pod is bound to gpu-1 by
# another scheduler, with no grant the scheduler counts
SHRUNK = """
nodes:
  - name: gpu-1
    gpus: [{uuid: GPU-1a, type: NVIDIA A40, memory: 8000}]
pods:
  - metadata: {name: big, namespace: ml, annotations: {hami.io/vgpu-node: gpu-1, hami.io/vgpu-devices-allocated: "GPU-1a,NVIDIA,20000,0:;"}}
    spec: {schedulerName: vgpu-scheduler, nodeName: gpu-1, containers: [{name: main, resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 20000}}}]}
    status: {phase: Running}
  - metadata: {name: elsewhere, namespace: ml}
    spec: {schedulerName: default-scheduler, nodeName: gpu-1, containers: [{name: main, resources: {limits: {nvidia.com/gpu: 1}}}]}
    status: {phase: Pending}
"""


@pytest.fixture
def shrunk(tmp_path: Path) -> Path:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(SHRUNK)
    return cluster


def test_a_placed_pod_that_would_fit_nowhere_again_still_says_where_it_is(
    capsys: pytest.CaptureFixture[str], shrunk: Path
) -> None:
    code, out, _ = explain(capsys, "ml/big", "--fake-cluster", str(shrunk))
    assert code == 0
    assert out.splitlines()[:2] == [
        "pod ml/big: runs on gpu-1 and holds cards GPU-1a 20000 MiB 0% cores",
        "  if it were scheduled again now, it fits on 0/1 nodes: 1 insufficient memory",
    ]

    code, out, _ = explain(capsys, "ml/big", "--fake-cluster", str(shrunk), "--json")
    report = json.loads(out)
    assert code == 0 and report["fits"] is False
    assert report["held"] == {
        "node": "gpu-1",
        "phase": "Running",
        "grants": [[{"uuid": "GPU-1a", "memory": 20000, "cores": 0}]],
    }


def test_a_pod_bound_without_a_counted_grant_says_so(
    capsys: pytest.CaptureFixture[str], shrunk: Path
) -> None:
    _, out, _ = explain(capsys, "ml/elsewhere", "--fake-cluster", str(shrunk))
    assert out.splitlines()[0] == (
        "pod ml/elsewhere: is placed on gpu-1 (phase Pending) and holds no card the scheduler counts"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a pod name or -f FILE"),
        (("ml/nowhere",), "pod ml/nowhere not found"),
        (("-n", "ml", "nowhere"), "pod ml/nowhere not found"),
        (("-f", str(CASES / "missing.yaml")), "cannot read pod manifest"),
    ],
)
def test_what_cannot_be_read_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, out, err = explain(capsys, *args, "--fake-cluster", str(CASES / "type-cluster.yaml"))
    assert (code, out) == (2, "")
    assert message in err


def test_a_pod_without_gpus_has_nothing_to_explain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("metadata: {name: web}\nspec: {containers: [{name: nginx}]}\n")
    code, _, err = explain(
        capsys, "-f", str(plain), "--fake-cluster", str(CASES / "type-cluster.yaml")
    )
    assert code == 2 and "asks for no nvidia.com/gpu" in err


def test_a_bad_gpu_quantity_names_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "metadata: {name: bad}\n"
        "spec: {containers: [{name: main, resources: {limits: {nvidia.com/gpumem: lots}}}]}\n"
    )
    code, _, err = explain(
        capsys, "-f", str(bad), "--fake-cluster", str(CASES / "type-cluster.yaml")
    )
    assert code == 2 and "nvidia.com/gpumem" in err and "lots" in err


def test_a_huge_scoring_weight_names_the_annotation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    weights = f"slot={'9' * 256000},core=1,memory=1"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        f"metadata: {{name: bad, annotations: {{hami.io/device-scoring-weights: '{weights}'}}}}\n"
        "spec: {containers: [{name: main, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    code, _, err = explain(
        capsys, "-f", str(bad), "--fake-cluster", str(CASES / "type-cluster.yaml")
    )
    assert code == 2 and "annotation hami.io/device-scoring-weights: item #0" in err
    assert len(err) < 500


def _typed_node(name: str, card_type: str, cards: int) -> dict[str, object]:
    gpus = [{"uuid": f"GPU-{name}-{i}", "type": card_type, "memory": 24000} for i in range(cards)]
    return {"name": name, "gpus": gpus}


@pytest.mark.parametrize(("policy", "where"), [("fgd", "a"), ("fgd-balanced", "b")])
def test_explain_places_as_the_scheduler_does_with_the_clusters_card_models(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, policy: str, where: str
) -> None:
    # as in tests/unit/scheduler/test_fgd.py: with half of the typical pods pinned to the two
    # T4 cards, fgd-balanced keeps a half share off them; fgd takes a's half-used T4 card
    half = {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 50}
    on_t4 = {
        "metadata": {
            "name": "p0",
            "namespace": "ml",
            "annotations": {
                "hami.io/vgpu-node": "a",
                "hami.io/vgpu-devices-allocated": "GPU-a-0,NVIDIA,12000,50:;",
                "nvidia.com/use-gputype": "T4",
            },
        },
        "spec": {"schedulerName": "vgpu-scheduler", "nodeName": "a",
                 "containers": [{"name": "main", "resources": {"limits": half}}]},
        "status": {"phase": "Running"},
    }  # fmt: skip
    cluster = {
        "nodes": [_typed_node("a", "NVIDIA T4", 2), _typed_node("b", "NVIDIA L4", 8)],
        "pods": [on_t4],
    }
    pod = {
        "metadata": {"name": "p1", "namespace": "ml"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": half}}]},
    }
    settings = {
        "node_policy": policy,
        "gpu_policy": policy,
        "fragmentation": {
            "typical_shapes": [
                {"memory_percent": 50, "cores": 50},
                {"memory_percent": 100, "cores": 100, "gputype": "T4"},
            ]
        },
    }
    files = {"cluster": cluster, "pod": pod, "config": settings}
    for name, content in files.items():
        (tmp_path / f"{name}.yaml").write_text(json.dumps(content))
    code, out, err = explain(
        capsys, "-f", str(tmp_path / "pod.yaml"), "--fake-cluster", str(tmp_path / "cluster.yaml"),
        "--config", str(tmp_path / "config.yaml"), "--json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert json.loads(out)["placement"]["node"] == where
