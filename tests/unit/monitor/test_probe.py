"""scripts/monitor_probe.py without a GPU run: its exit-2 paths and how it judges samples."""

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from tests.unit.nvml.driver import install, pynvml

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "monitor_probe.py"
MIB = 1 << 20


@pytest.fixture
def probe() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT))


def test_no_gpu_prints_a_clear_line_and_exits_2(
    mocker: MockerFixture, probe: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    driver = install(mocker)
    driver.mocks["nvmlInit"].side_effect = pynvml.NVMLError_LibraryNotFound()

    code = probe["main"](["--libvgpu", "/nonexistent/libvgpu.so"])

    assert code == 2
    assert capsys.readouterr().out.startswith(
        "monitor_probe: SKIP no usable GPU: the NVIDIA driver library libnvidia-ml.so.1 was not "
        "found"
    )


def test_a_gpu_without_hami_core_prints_a_clear_line_and_exits_2(
    mocker: MockerFixture,
    probe: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    install(mocker)
    mocker.patch.object(
        pynvml,
        "nvmlDeviceGetUtilizationRates",
        side_effect=pynvml.NVMLError_NotSupported(),
        create=True,
    )
    missing = tmp_path / "libvgpu.so"

    code = probe["main"](["--libvgpu", str(missing)])

    assert code == 2
    assert capsys.readouterr().out == (
        f"monitor_probe: SKIP no HAMi-core library at {missing} (pass --libvgpu PATH or set "
        "VGPU_LIBVGPU)\n"
    )


def _sample(**values: float | str) -> dict[str, Any]:
    return {"region": "layout 1, version 1.2, 1 process(es)", **values}


def test_figures_that_track_the_workload_pass(probe: dict[str, Any]) -> None:
    judge: Callable[..., list[str]] = probe["judge"]
    samples = [
        _sample(hami_vgpu_memory_limit_bytes=1024 * MIB, hami_host_gpu_memory_used_bytes=500 * MIB),
        _sample(
            hami_vgpu_memory_used_bytes=300 * MIB,
            hami_vgpu_memory_limit_bytes=1024 * MIB,
            hami_container_last_kernel_elapsed_seconds=0,
            hami_host_gpu_memory_used_bytes=900 * MIB,
        ),
    ]

    assert judge(samples, 0, 500 * MIB, 256, 1024) == []


def test_figures_that_miss_the_workload_say_what_missed(probe: dict[str, Any]) -> None:
    judge: Callable[..., list[str]] = probe["judge"]
    samples = [
        {"region": None},
        _sample(
            hami_vgpu_memory_used_bytes=100 * MIB,
            hami_vgpu_memory_limit_bytes=2048 * MIB,
            hami_host_gpu_memory_used_bytes=600 * MIB,
        ),
    ]

    assert judge(samples, 3, 500 * MIB, 256, 1024) == [
        "the workload failed (exit 3)",
        "container memory peaked at 100 MiB, below the 256 MiB allocated",
        f"container limit read as [{2048 * MIB}] bytes, not 1024 MiB",
        "no last-kernel time appeared",
        "host memory rose by only 100 MiB",
    ]
