"""scripts/dra_probe.py's pieces that need no GPU: the claim it allocates, the CDI edits it
applies by hand, its verdict, and its exit when there is no GPU."""

import runpy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.dra_driver.node import make_node, ref

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "dra_probe.py"


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT))


def test_without_a_gpu_it_says_skip_and_exits_2(
    probe: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = probe["main"]([])  # this machine has no NVIDIA driver
    assert code == 2
    assert capsys.readouterr().out.startswith("dra_probe: SKIP no usable GPU: ")


def test_the_claim_it_prepares_gives_the_workload_its_limits(
    probe: dict[str, Any], tmp_path: Path
) -> None:
    node = make_node(tmp_path)
    node.container.publisher().publish()
    [published] = node.api.list_slices("gpu.vgpu.io", "gpu-node-1")
    node_api = node.api

    claim = probe["_allocated_claim"](node_api, published, 1024, 50)
    answer = node.preparer.prepare([ref(claim)])["probe-claim-uid"]
    assert answer.error == ""
    env = probe["container_env"](node.spec("probe-claim-uid"), answer.devices[0].cdi_ids)

    assert {k: v for k, v in env.items() if k.startswith(("CUDA_DEVICE_M", "CUDA_DEVICE_S"))} == {
        "CUDA_DEVICE_MEMORY_LIMIT": "1024m",
        "CUDA_DEVICE_SM_LIMIT": "50",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "1024m",
        "CUDA_DEVICE_SM_LIMIT_0": "50",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": env["CUDA_DEVICE_MEMORY_SHARED_CACHE"],
    }
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"]


def test_only_the_named_devices_edits_apply_the_later_winning(probe: dict[str, Any]) -> None:
    spec = {
        "kind": "vgpu.io/claim",
        "containerEdits": {"env": ["A=spec", "B=spec"]},
        "devices": [
            {"name": "d0", "containerEdits": {"env": ["B=d0", "C=d0"]}},
            {"name": "d1", "containerEdits": {"env": ["C=d1"]}},
        ],
    }
    assert probe["container_env"](spec, ["vgpu.io/claim=d0", "nvidia.com/gpu=0"]) == {
        "A": "spec", "B": "d0", "C": "d0"
    }


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"total_mib": 1024, "held_mib": 960, "stopped_by": 2}, None),
        ({"total_mib": 81920, "held_mib": 960, "stopped_by": 2}, "CUDA reported 81920 MiB"),
        ({"total_mib": 1024, "held_mib": 2048, "stopped_by": 0}, "held 2048 MiB, past"),
        ({"total_mib": 1024, "held_mib": 64, "stopped_by": 2}, "refused too early"),
    ],
)
def test_the_verdict_names_what_did_not_hold(
    probe: dict[str, Any], result: dict[str, int], problem: str | None
) -> None:
    problems = probe["judge"](result, 0, 1024, {"spec_left": False})
    assert (problems == []) if problem is None else any(problem in p for p in problems)
