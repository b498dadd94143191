"""scripts/nvml_probe.py against the patched driver: its JSON report and its no-GPU exit."""

import json
import runpy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.unit.nvml.driver import A100_UUID, V100_UUID, Driver, numa, pynvml

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "nvml_probe.py"


@pytest.fixture
def probe() -> Callable[[Sequence[str]], int]:
    main: Callable[[Sequence[str]], int] = runpy.run_path(str(SCRIPT))["main"]
    return main


def test_probe_prints_gpus_and_the_register_annotation(
    driver: Driver,
    sysfs: Path,
    probe: Callable[[Sequence[str]], int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    numa(sysfs, "0000:af:00.0", "1")
    driver.cards[0].register_error = pynvml.NVMLError_NotSupported()

    code = probe(["--wait", "0", "--split-count", "4", "--sysfs-root", str(sysfs)])

    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(g["uuid"], g["memory_mib"], g["numa"]) for g in report["gpus"]] == [
        (V100_UUID, 32768, -1),  # no numa_node file: unknown
        (A100_UUID, 81920, 1),
    ]
    registered = json.loads(report["register_annotation"]["hami.io/node-nvidia-register"])
    assert [(d["id"], d["count"], d.get("health", False)) for d in registered] == [
        (V100_UUID, 4, False),
        (A100_UUID, 4, True),
    ]
    assert [e["uuid"] for e in report["health_events"]] == [V100_UUID]
    driver.mocks["nvmlShutdown"].assert_called_once_with()


def test_probe_exits_2_with_the_reason_when_there_is_no_gpu(
    driver: Driver, probe: Callable[[Sequence[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    driver.mocks["nvmlInit"].side_effect = pynvml.NVMLError_LibraryNotFound()

    code = probe(["--wait", "0"])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("nvml_probe: no usable GPU: the NVIDIA driver library libnvidia-ml.so.1")


def test_probe_prints_the_topology_matrix_and_mig_capability(
    driver: Driver, probe: Callable[[Sequence[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    driver.ancestors[0, 1] = pynvml.NVML_TOPOLOGY_SINGLE
    v100, a100 = driver.cards
    v100.nvlinks = [("0000:af:00.0", pynvml.NVML_NVLINK_DEVICE_TYPE_GPU)] * 2
    a100.nvlinks = [("0000:3b:00.0", pynvml.NVML_NVLINK_DEVICE_TYPE_GPU)] * 2
    v100.mig = pynvml.NVMLError_NotSupported()
    a100.mig = (0, 0)

    assert probe(["--wait", "0"]) == 0

    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert report["topology_matrix"] == [
        "             GPU0         GPU1",
        "GPU0         X            PIX+NV2 250",
        "GPU1         PIX+NV2 250  X",
    ]
    scores = json.loads(report["score_annotation"]["hami.io/node-nvidia-score"])
    assert scores == [
        {"uuid": V100_UUID, "score": {A100_UUID: 250}},
        {"uuid": A100_UUID, "score": {V100_UUID: 250}},
    ]
    assert report["mig"][V100_UUID]["supported"] is False
    assert report["mig"][A100_UUID] == {
        "supported": True,
        "enabled": False,
        "pending": False,
        "profiles": [],
    }


def test_probe_reports_a_failed_topology_reading_and_still_succeeds(
    driver: Driver, probe: Callable[[Sequence[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    driver.ancestors[0, 1] = pynvml.NVMLError_Unknown()
    assert probe(["--wait", "0"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert "could not read the GPU topology" in report["topology_error"]
    assert "topology_matrix" not in report
