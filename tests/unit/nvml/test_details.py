"""NvmlGpus.gpu_details: what the DRA driver publishes beyond the GPU's name and memory."""

import pytest
from pytest_mock import MockerFixture

from tests.unit.nvml.driver import A100_UUID, V100_UUID, Driver, gpus, pynvml
from vgpu.adapters.nvml.details import architecture, cuda_version
from vgpu.ports.gpu import GpuDetails


def test_each_gpu_is_described_from_nvml(driver: Driver, mocker: MockerFixture) -> None:
    capability = {V100_UUID: (7, 0), A100_UUID: (8, 0)}
    mocker.patch.object(
        pynvml, "nvmlDeviceGetCudaComputeCapability", side_effect=lambda card: capability[card.uuid]
    )
    mocker.patch.object(pynvml, "nvmlSystemGetCudaDriverVersion", return_value=12040)

    details = gpus().gpu_details()

    assert details == {
        V100_UUID: GpuDetails("Volta", "0000:3b:00.0", "550.54.15", "12.4"),
        A100_UUID: GpuDetails("Ampere", "0000:af:00.0", "550.54.15", "12.4"),
    }


def test_what_nvml_cannot_say_is_left_empty_and_nothing_fails(
    driver: Driver, mocker: MockerFixture
) -> None:
    for name in ("nvmlDeviceGetCudaComputeCapability", "nvmlSystemGetCudaDriverVersion"):
        mocker.patch.object(pynvml, name, side_effect=pynvml.NVMLError_NotSupported())
    driver.mocks["nvmlSystemGetDriverVersion"].side_effect = pynvml.NVMLError_Unknown()

    details = gpus().gpu_details()

    assert details[V100_UUID] == GpuDetails("", "0000:3b:00.0", "", "")


@pytest.mark.parametrize(
    ("major", "minor", "name"),
    [(7, 0, "Volta"), (7, 5, "Turing"), (8, 0, "Ampere"), (8, 6, "Ampere"), (8, 9, "Ada Lovelace"),
     (9, 0, "Hopper"), (10, 0, "Blackwell"), (12, 0, "Blackwell"), (6, 1, "Pascal"), (99, 0, "")],
)
def test_architecture_names_follow_the_compute_capability(major: int, minor: int, name: str) -> None:
    assert architecture(major, minor) == name


def test_the_cuda_driver_version_reads_as_nvidia_writes_it() -> None:
    assert (cuda_version(12040), cuda_version(11080), cuda_version(13000)) == ("12.4", "11.8", "13.0")
