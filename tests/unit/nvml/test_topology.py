"""GPU links from NVML as HAMi reads them (docs/protocol.md#pair-scores), against the patched driver."""

from types import SimpleNamespace

import pytest

from tests.unit.nvml.driver import A100_UUID, V100_UUID, Driver, gpus, pynvml
from vgpu.domain.topology import GpuLink, PcieLink, pair_scores
from vgpu.ports.gpu import GpuUnavailable

GPU, SWITCH = pynvml.NVML_NVLINK_DEVICE_TYPE_GPU, pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH


def test_pcie_level_and_direct_nvlinks_make_the_links(driver: Driver) -> None:
    driver.ancestors[0, 1] = pynvml.NVML_TOPOLOGY_SINGLE
    v100, a100 = driver.cards
    v100.nvlinks = [("00000000:AF:00.0", GPU)] * 4  # to the A100's bus, NVML's long spelling
    a100.nvlinks = [("0000:3b:00.0", GPU)] * 4

    links = gpus().read_topology()

    assert links == [
        GpuLink(V100_UUID, A100_UUID, PcieLink.SINGLE_SWITCH, 4),
        GpuLink(A100_UUID, V100_UUID, PcieLink.SINGLE_SWITCH, 4),
    ]
    assert pair_scores(links).scores[V100_UUID] == {A100_UUID: 450}


def test_gpus_without_nvlink_score_by_pcie_alone(driver: Driver) -> None:
    links = gpus().read_topology()
    assert [(link.pcie, link.nvlinks) for link in links] == [(PcieLink.CROSS_CPU, 0)] * 2


def test_nvswitch_links_count_the_smaller_side(driver: Driver) -> None:
    v100, a100 = driver.cards
    v100.nvlinks = [("0000:01:00.0", SWITCH)] * 18
    a100.nvlinks = [("0000:02:00.0", SWITCH)] * 12
    links = gpus().read_topology()
    assert [link.nvlinks for link in links] == [12, 12]


def test_nvlinks_to_other_gpus_do_not_count(driver: Driver) -> None:
    driver.cards[0].nvlinks = [("0000:99:00.0", GPU)]
    driver.cards[1].nvlinks = [("0000:98:00.0", GPU)]
    assert [link.nvlinks for link in gpus().read_topology()] == [0, 0]


def test_an_nvml_failure_fails_the_whole_reading(driver: Driver) -> None:
    driver.ancestors[0, 1] = pynvml.NVMLError_Unknown()
    with pytest.raises(GpuUnavailable, match="could not read the GPU topology"):
        gpus().read_topology()


def test_an_unknown_pcie_level_fails_the_whole_reading(driver: Driver) -> None:
    driver.ancestors[0, 1] = 35
    with pytest.raises(GpuUnavailable, match="unknown PCIe topology level 35"):
        gpus().read_topology()


def test_mig_capability_lists_profiles_only_while_mig_is_on(driver: Driver) -> None:
    v100, a100 = driver.cards
    v100.mig = pynvml.NVMLError_NotSupported()
    a100.mig = (pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE)
    a100.mig_profiles = {
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE: SimpleNamespace(
            id=0,
            sliceCount=1,
            instanceCount=7,
            multiprocessorCount=14,
            memorySizeMB=9856,
            placements=[(0, 1), (1, 1)],
        ),
        pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE: SimpleNamespace(
            id=4,
            sliceCount=7,
            instanceCount=1,
            multiprocessorCount=98,
            memorySizeMB=80896,
            placements=[(0, 8)],
        ),
    }

    capability = gpus().mig_capabilities()

    assert not capability[V100_UUID].supported
    a100_mig = capability[A100_UUID]
    assert a100_mig.supported and a100_mig.enabled and not a100_mig.pending
    assert [(p.name, p.core, p.instances, len(p.placements)) for p in a100_mig.profiles] == [
        ("1g.10gb", 15, 7, 2),  # 14 of 98 multiprocessors, rounded up as HAMi does
        ("7g.79gb", 100, 1, 1),
    ]


def test_mig_capable_but_off_reports_no_profiles(driver: Driver) -> None:
    driver.cards[1].mig = (0, pynvml.NVML_DEVICE_MIG_ENABLE)  # enable waits for a reset
    capability = gpus().mig_capabilities()[A100_UUID]
    assert capability.supported and not capability.enabled and capability.pending
    assert capability.profiles == ()
