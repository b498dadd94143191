"""The fake GPU inventory: its YAML schema, its errors, and health changes by file or by call."""

import logging
import os
import threading
from pathlib import Path

import pytest

from vgpu.adapters.fake.gpus import FakeGpuFileError, FakeGpus
from vgpu.domain.inventory import GpuInfo, HealthEvent
from vgpu.ports.gpu import GpuDetails, GpuUnavailable, GpuUsage

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fake-gpus.yaml"

TWO_GPUS = """\
gpus:
  - uuid: GPU-a
    name: Tesla T4
    memory_mib: 15360
  - uuid: GPU-b
    name: NVIDIA A100-SXM4-80GB
    memory_mib: 81920
    index: 7
    numa: 1
    mig: true
"""


def write(path: Path, text: str) -> Path:
    """Write `text` and move the mtime forward, so a change is seen whatever the clock grain."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    stamp = before + 1_000_000_000
    os.utime(path, ns=(stamp, stamp))
    return path


@pytest.fixture
def gpu_file(tmp_path: Path) -> Path:
    return write(tmp_path / "gpus.yaml", TWO_GPUS)


# the file -----------------------------------------------------------------------------------
def test_the_shipped_example_is_valid_and_all_healthy() -> None:
    fake = FakeGpus.from_file(EXAMPLE)

    assert [g.index for g in fake.discover()] == [0, 1, 2]
    assert fake.wait_for_health_events(0) == []


def test_fields_and_their_defaults(gpu_file: Path) -> None:
    assert FakeGpus.from_file(gpu_file).discover() == [
        GpuInfo("GPU-a", 0, "Tesla T4", 15360, numa=0, mig_enabled=False),
        GpuInfo("GPU-b", 7, "NVIDIA A100-SXM4-80GB", 81920, numa=1, mig_enabled=True),
    ]


def test_the_details_a_dra_driver_publishes_come_from_the_file_when_given(
    gpu_file: Path,
) -> None:
    assert FakeGpus.from_file(gpu_file).gpu_details() == {
        "GPU-a": GpuDetails(), "GPU-b": GpuDetails()
    }
    write(gpu_file, "driver_version: 550.54.15\ncuda_driver_version: '12.4'\n" + TWO_GPUS.replace(
        "    memory_mib: 15360\n",
        "    memory_mib: 15360\n    architecture: Turing\n    pci_bus_id: 0000:3b:00.0\n",
    ))
    details = FakeGpus.from_file(gpu_file).gpu_details()
    assert details["GPU-a"] == GpuDetails("Turing", "0000:3b:00.0", "550.54.15", "12.4")
    assert details["GPU-b"] == GpuDetails("", "", "550.54.15", "12.4")


ENTRY = "  - uuid: GPU-a\n    name: Tesla T4\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "gpus:\n" + ENTRY,
            "gpus[0] (uuid GPU-a): memory_mib: Field required",
        ),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 1\n  - uuid: GPU-b\n    name: T4\n"
            "    memory_mib: -5\n",
            "gpus[1] (uuid GPU-b): memory_mib: Input should be greater than 0 (got -5)",
        ),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 32GiB\n",
            "gpus[0] (uuid GPU-a): memory_mib: Input should be a valid integer (got '32GiB')",
        ),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 1\n    memry: 2\n",
            "gpus[0] (uuid GPU-a): memry: unknown field (got 2)",
        ),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 1\n    mig: sometimes\n",
            "gpus[0] (uuid GPU-a): mig: Input should be a valid boolean (got 'sometimes')",
        ),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 1\n    numa: -2\n",
            "gpus[0] (uuid GPU-a): numa: Input should be greater than or equal to -1",
        ),
        (
            "gpus:\n  - uuid: ''\n    name: T4\n    memory_mib: 1\n",
            "gpus[0] (uuid ): uuid: String should have at least 1 character",
        ),
        ("gpus:\n  - GPU-a\n", "gpus[0]: expected a mapping of GPU fields (got 'GPU-a')"),
        ("gpus: GPU-a\n", "gpus: Input should be a valid list"),
        ("gpu:\n" + ENTRY, "gpus: Field required"),
        ("- uuid: GPU-a\n", "expected a mapping with a `gpus:` list, got a list"),
        ("", "expected a mapping with a `gpus:` list, got an empty file"),
        ("gpus: [\n", "not valid YAML"),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 1\n" + ENTRY + "    memory_mib: 1\n",
            "gpus[1].uuid: GPU-a is already used by gpus[0]",
        ),
        (
            "gpus:\n" + ENTRY + "    memory_mib: 1\n  - uuid: GPU-b\n    name: T4\n"
            "    memory_mib: 1\n    index: 0\n",
            "gpus[1].index: 0 is already used by gpus[0]",
        ),
    ],
)
def test_schema_errors_name_the_file_entry_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path / "bad.yaml", text)

    with pytest.raises(FakeGpuFileError) as failure:
        FakeGpus.from_file(path)

    assert str(failure.value).startswith(f"{path}: ")
    assert message in str(failure.value)


def test_schema_errors_are_gpu_unavailable_errors(tmp_path: Path) -> None:
    with pytest.raises(GpuUnavailable, match="cannot read the fake GPU file"):
        FakeGpus.from_file(tmp_path / "missing.yaml")


def test_an_empty_list_loads_but_discovers_no_gpu_like_a_node_without_one(tmp_path: Path) -> None:
    fake = FakeGpus.from_file(write(tmp_path / "none.yaml", "gpus: []\n"))

    with pytest.raises(GpuUnavailable, match="lists no GPUs"):
        fake.discover()


# health through the file --------------------------------------------------------------------
def test_a_gpu_unhealthy_in_the_file_is_reported_by_the_first_wait(tmp_path: Path) -> None:
    text = TWO_GPUS.replace("    mig: true\n", "    mig: true\n    healthy: false\n")
    fake = FakeGpus.from_file(write(tmp_path / "gpus.yaml", text))

    events = fake.wait_for_health_events(0)

    assert events == [HealthEvent("GPU-b", False, f"marked unhealthy in {tmp_path / 'gpus.yaml'}")]
    assert fake.wait_for_health_events(0) == []


def test_editing_the_file_reports_health_changes_both_ways(gpu_file: Path) -> None:
    fake = FakeGpus.from_file(gpu_file)
    assert fake.wait_for_health_events(0) == []

    broken = TWO_GPUS.replace("memory_mib: 15360\n", "memory_mib: 15360\n    healthy: false\n")
    write(gpu_file, broken.replace("healthy: false\n", "healthy: false\n    reason: XID 79\n"))
    assert fake.wait_for_health_events(0) == [HealthEvent("GPU-a", False, "XID 79")]

    write(gpu_file, TWO_GPUS)
    assert fake.wait_for_health_events(0) == [
        HealthEvent("GPU-a", True, f"marked healthy in {gpu_file}")
    ]
    assert fake.health() == {"GPU-a": True, "GPU-b": True}


def test_a_gpu_removed_from_the_file_is_reported_unhealthy_and_not_discovered(
    gpu_file: Path,
) -> None:
    fake = FakeGpus.from_file(gpu_file)

    write(gpu_file, TWO_GPUS.split("  - uuid: GPU-b")[0])

    assert fake.wait_for_health_events(0) == [
        HealthEvent("GPU-b", False, f"removed from {gpu_file}")
    ]
    assert [g.uuid for g in fake.discover()] == ["GPU-a"]


def test_an_invalid_edit_keeps_the_previous_gpus_until_fixed(
    gpu_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeGpus.from_file(gpu_file)

    with caplog.at_level(logging.WARNING):
        write(gpu_file, "gpus: [\n")
        assert len(fake.discover()) == 2
    assert "keeping the previous fake GPUs" in caplog.text

    write(gpu_file, TWO_GPUS.replace("    mig: true\n", "    mig: true\n    healthy: false\n"))
    assert [e.uuid for e in fake.wait_for_health_events(0)] == ["GPU-b"]


def test_a_blocked_waiter_sees_a_file_edit(gpu_file: Path) -> None:
    fake = FakeGpus.from_file(gpu_file, poll_interval_s=0.005)
    seen: list[HealthEvent] = []
    waiter = threading.Thread(target=lambda: seen.extend(fake.wait_for_health_events(30)))
    waiter.start()

    write(gpu_file, TWO_GPUS.replace("    mig: true\n", "    mig: true\n    healthy: false\n"))
    waiter.join(30)

    assert [e.uuid for e in seen] == ["GPU-b"]
    fake.close()


# health through calls -----------------------------------------------------------------------
def fixed() -> FakeGpus:
    return FakeGpus([GpuInfo("GPU-a", 0, "Tesla T4", 15360), GpuInfo("GPU-b", 1, "T4", 15360)])


def test_mark_unhealthy_is_reported_once() -> None:
    fake = fixed()

    fake.mark_unhealthy("GPU-b", "XID 48")
    fake.mark_unhealthy("GPU-b", "XID 48 again")

    assert fake.wait_for_health_events(0) == [HealthEvent("GPU-b", False, "XID 48")]
    assert fake.wait_for_health_events(0) == []


def test_mark_healthy_reports_a_recovery() -> None:
    fake = fixed()
    fake.mark_unhealthy("GPU-a")
    fake.wait_for_health_events(0)

    fake.mark_healthy("GPU-a")

    assert [(e.uuid, e.healthy) for e in fake.wait_for_health_events(0)] == [("GPU-a", True)]


def test_marking_an_unknown_gpu_names_it_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"no fake GPU has uuid 'GPU-z' \(known: GPU-a, GPU-b\)"):
        fixed().mark_unhealthy("GPU-z")


def test_gpus_given_unhealthy_at_construction_are_reported_first() -> None:
    fake = FakeGpus([GpuInfo("GPU-a", 0, "T4", 1)], unhealthy={"GPU-a": "broken"})

    assert fake.wait_for_health_events(0) == [HealthEvent("GPU-a", False, "broken")]


def test_a_mark_wakes_a_blocked_waiter() -> None:
    fake = fixed()
    seen: list[HealthEvent] = []
    waiter = threading.Thread(target=lambda: seen.extend(fake.wait_for_health_events(30)))
    waiter.start()

    fake.mark_unhealthy("GPU-a", "XID 79")
    waiter.join(30)

    assert seen == [HealthEvent("GPU-a", False, "XID 79")]


def test_close_wakes_a_waiter_and_ends_the_inventory() -> None:
    fake = fixed()
    seen: list[list[HealthEvent]] = []
    waiter = threading.Thread(target=lambda: seen.append(fake.wait_for_health_events(30)))
    waiter.start()

    fake.close()
    waiter.join(30)

    assert seen == [[]]
    with pytest.raises(GpuUnavailable, match="closed"):
        fake.discover()


def test_usage_comes_from_the_file_and_defaults_to_zero(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(
        TWO_GPUS.replace("    numa: 1", "    numa: 1\n    used_mib: 2048\n    utilization: 55\n"
                         "    memory_utilization: 9")
    )

    usage = FakeGpus.from_file(path).read_usage()

    assert usage == [
        GpuUsage("GPU-a", 0, "Tesla T4", 0, 0, 0),
        GpuUsage("GPU-b", 7, "NVIDIA A100-SXM4-80GB", 2048 * 1024 * 1024, 55, 9),
    ]


def test_a_utilization_above_100_names_the_entry_and_field(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(TWO_GPUS.replace("    numa: 1", "    numa: 1\n    utilization: 101"))

    with pytest.raises(FakeGpuFileError, match=r"gpus\[1\] \(uuid GPU-b\): utilization"):
        FakeGpus.from_file(path)
