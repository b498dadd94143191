"""NvmlGpus.read_usage against a patched pynvml: the host figures `vgpu monitor` exports."""

from types import SimpleNamespace

import pytest
from pytest_mock import MockerFixture

from tests.unit.nvml.driver import A100_UUID, GIB, V100_UUID, Card, Driver, gpus, pynvml
from vgpu.ports.gpu import GpuUnavailable, GpuUsage


@pytest.fixture
def busy(driver: Driver, mocker: MockerFixture) -> Driver:
    """The two cards with memory in use and utilisation: V100 3 GiB 45/10, A100 1 GiB 7/2."""
    used = {V100_UUID: 3 * GIB, A100_UUID: GIB}
    rates = {V100_UUID: (45, 10), A100_UUID: (7, 2)}

    def memory(card: Card) -> SimpleNamespace:
        return SimpleNamespace(total=card.total_bytes, used=used[str(card.uuid)])

    def utilization(card: Card) -> SimpleNamespace:
        gpu, mem = rates[str(card.uuid)]
        return SimpleNamespace(gpu=gpu, memory=mem)

    mocker.patch.object(pynvml, "nvmlDeviceGetMemoryInfo", side_effect=memory)
    driver.mocks["nvmlDeviceGetUtilizationRates"] = mocker.patch.object(
        pynvml, "nvmlDeviceGetUtilizationRates", side_effect=utilization, create=True
    )
    return driver


def test_every_card_reports_used_memory_and_utilisation(busy: Driver) -> None:
    assert gpus().read_usage() == [
        GpuUsage(V100_UUID, 0, "Tesla V100-PCIE-32GB", 3 * GIB, 45, 10),
        GpuUsage(A100_UUID, 1, "NVIDIA A100-SXM4-80GB", GIB, 7, 2),
    ]


def test_a_figure_the_card_does_not_support_is_none(busy: Driver) -> None:
    busy.mocks["nvmlDeviceGetUtilizationRates"].side_effect = pynvml.NVMLError_NotSupported()

    first = gpus().read_usage()[0]

    assert (first.memory_used_bytes, first.utilization_percent) == (3 * GIB, None)
    assert first.memory_controller_percent is None


def test_a_card_that_cannot_be_named_is_left_out(busy: Driver) -> None:
    busy.cards[0].uuid = pynvml.NVMLError_GpuIsLost()  # type: ignore[assignment]

    assert [u.uuid for u in gpus().read_usage()] == [A100_UUID]


def test_no_driver_is_gpu_unavailable(busy: Driver) -> None:
    busy.mocks["nvmlInit"].side_effect = pynvml.NVMLError_DriverNotLoaded()

    with pytest.raises(GpuUnavailable, match="kernel driver is not loaded"):
        gpus().read_usage()
