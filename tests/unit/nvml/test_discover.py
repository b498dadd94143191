"""NvmlGpus.discover and close against a patched pynvml: what a node reports, and every failure."""

import logging
from pathlib import Path

import pytest

from tests.unit.nvml.driver import A100_UUID, V100_UUID, Driver, gpus, numa, pynvml
from vgpu.domain.inventory import GpuInfo, SharingConfig, register_device
from vgpu.ports.gpu import GpuUnavailable


def test_discover_reports_every_gpu_in_index_order(driver: Driver, sysfs: Path) -> None:
    numa(sysfs, "0000:3b:00.0", "0\n")
    numa(sysfs, "0000:af:00.0", "1\n")

    found = gpus(sysfs).discover()

    assert found == [
        GpuInfo(V100_UUID, 0, "Tesla V100-PCIE-32GB", 32768, numa=0, mig_enabled=False),
        GpuInfo(A100_UUID, 1, "NVIDIA A100-SXM4-80GB", 81920, numa=1, mig_enabled=False),
    ]


def test_names_and_uuids_given_as_bytes_by_older_bindings_become_text(driver: Driver) -> None:
    driver.cards[0].name = b"Tesla T4"
    driver.cards[0].uuid = V100_UUID.encode()

    first = gpus().discover()[0]

    assert (first.uuid, first.name) == (V100_UUID, "Tesla T4")


def test_memory_is_whole_mib_rounded_down(driver: Driver) -> None:
    driver.cards[0].total_bytes = 34_089_730_048  # a V100-32GB as NVML reports it

    assert gpus().discover()[0].memory_mib == 32510


def test_discovered_gpus_feed_the_register_annotation_rule(driver: Driver) -> None:
    devices = [register_device(g, SharingConfig(split_count=4)) for g in gpus().discover()]

    assert [d.type for d in devices] == ["NVIDIA-Tesla V100-PCIE-32GB", "NVIDIA A100-SXM4-80GB"]
    assert [d.memory for d in devices] == [32768, 81920]


# NVML cannot start ---------------------------------------------------------------------------
def test_missing_driver_library_says_what_to_check(driver: Driver) -> None:
    driver.mocks["nvmlInit"].side_effect = pynvml.NVMLError_LibraryNotFound()

    with pytest.raises(GpuUnavailable) as failure:
        gpus().discover()

    message = str(failure.value)
    assert "libnvidia-ml.so.1 was not found" in message
    assert "NVIDIA container toolkit" in message
    assert "--fake-gpus" in message


def test_driver_not_loaded_says_so(driver: Driver) -> None:
    driver.mocks["nvmlInit"].side_effect = pynvml.NVMLError_DriverNotLoaded()

    with pytest.raises(GpuUnavailable, match="kernel driver is not loaded"):
        gpus().discover()


def test_version_mismatch_suggests_a_reboot(driver: Driver) -> None:
    driver.mocks["nvmlInit"].side_effect = pynvml.NVMLError_LibRmVersionMismatch()

    with pytest.raises(GpuUnavailable, match="reboot the node"):
        gpus().discover()


def test_any_other_init_failure_names_the_nvml_error(driver: Driver) -> None:
    driver.mocks["nvmlInit"].side_effect = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    with pytest.raises(GpuUnavailable, match=r"NVML failed to start \(NVMLError_Unknown"):
        gpus().discover()


def test_a_failed_init_is_retried_and_never_shut_down(driver: Driver) -> None:
    driver.mocks["nvmlInit"].side_effect = [pynvml.NVMLError_DriverNotLoaded(), None]
    adapter = gpus()
    with pytest.raises(GpuUnavailable):
        adapter.discover()

    assert len(adapter.discover()) == 2
    adapter.close()
    assert driver.mocks["nvmlInit"].call_count == 2
    assert driver.mocks["nvmlShutdown"].call_count == 1


def test_no_gpu_is_a_clear_error(driver: Driver) -> None:
    driver.cards.clear()

    with pytest.raises(GpuUnavailable, match="no NVIDIA GPU on this node"):
        gpus().discover()


def test_a_failing_device_count_is_a_clear_error(driver: Driver) -> None:
    driver.mocks["nvmlDeviceGetCount"].side_effect = pynvml.NVMLError_Unknown()

    with pytest.raises(GpuUnavailable, match="could not count the GPUs"):
        gpus().discover()


# one GPU misbehaves ---------------------------------------------------------------------------
def test_an_unreadable_gpu_is_left_out_and_logged(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    driver.cards[0].uuid = pynvml.NVMLError_GpuIsLost()

    with caplog.at_level(logging.ERROR):
        found = gpus().discover()

    assert [g.uuid for g in found] == [A100_UUID]
    assert [g.index for g in found] == [1]
    assert "leaving out GPU 0" in caplog.text


def test_no_readable_gpu_is_a_clear_error_listing_each_problem(driver: Driver) -> None:
    for card in driver.cards:
        card.uuid = pynvml.NVMLError_GpuIsLost()

    with pytest.raises(GpuUnavailable, match=r"lists 2 GPU\(s\) but none could be read: GPU 0"):
        gpus().discover()


def test_mig_mode_on_is_reported(driver: Driver) -> None:
    driver.cards[1].mig = (pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE)

    assert [g.mig_enabled for g in gpus().discover()] == [False, True]


def test_mig_pending_but_not_current_is_off(driver: Driver) -> None:
    driver.cards[1].mig = (pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_ENABLE)

    assert not gpus().discover()[1].mig_enabled


def test_mig_not_supported_means_off(driver: Driver) -> None:
    driver.cards[0].mig = pynvml.NVMLError_NotSupported()

    assert not gpus().discover()[0].mig_enabled


def test_mig_mode_unreadable_for_another_reason_is_off_and_logged(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    driver.cards[0].mig = pynvml.NVMLError_Unknown()

    with caplog.at_level(logging.WARNING):
        assert not gpus().discover()[0].mig_enabled
    assert "GPU 0: NVML cannot read its MIG mode" in caplog.text


# NUMA from sysfs ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "expected"),
    [("1\n", 1), ("3", 3), ("-1\n", -1), ("-7", -1), ("garbage", -1)],
)
def test_numa_node_comes_from_sysfs(
    driver: Driver, sysfs: Path, content: str, expected: int
) -> None:
    numa(sysfs, "0000:3b:00.0", content)

    assert gpus(sysfs).discover()[0].numa == expected


def test_numa_is_unknown_when_sysfs_has_no_such_device(driver: Driver, sysfs: Path) -> None:
    numa(sysfs, "0000:af:00.0", "1")

    assert [g.numa for g in gpus(sysfs).discover()] == [-1, 1]


def test_bus_id_given_as_bytes_with_a_wide_domain_is_found(driver: Driver, sysfs: Path) -> None:
    driver.cards[0].bus_id = b"00010000:3B:00.0"
    numa(sysfs, "10000:3b:00.0", "1")

    assert gpus(sysfs).discover()[0].numa == 1


def test_numa_is_unknown_when_the_pci_info_cannot_be_read(driver: Driver, sysfs: Path) -> None:
    numa(sysfs, "0000:3b:00.0", "1")
    driver.mocks["nvmlDeviceGetPciInfo"].side_effect = pynvml.NVMLError_NotSupported()

    assert gpus(sysfs).discover()[0].numa == -1


# close ----------------------------------------------------------------------------------------
def test_close_shuts_nvml_down_once(driver: Driver) -> None:
    adapter = gpus()
    adapter.discover()

    adapter.close()
    adapter.close()

    assert driver.mocks["nvmlShutdown"].call_count == 1


def test_close_without_discover_does_not_touch_nvml(driver: Driver) -> None:
    gpus().close()

    assert driver.mocks["nvmlInit"].call_count == 0
    assert driver.mocks["nvmlShutdown"].call_count == 0


def test_a_failing_shutdown_is_logged_not_raised(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    driver.mocks["nvmlShutdown"].side_effect = pynvml.NVMLError_Uninitialized()
    adapter = gpus()
    adapter.discover()

    with caplog.at_level(logging.WARNING):
        adapter.close()

    assert "NVML shutdown failed" in caplog.text


def test_discover_after_close_is_refused(driver: Driver) -> None:
    adapter = gpus()
    adapter.close()

    with pytest.raises(GpuUnavailable, match="closed"):
        adapter.discover()
