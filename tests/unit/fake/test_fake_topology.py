"""The fake GPU inventory models NVLink/PCIe links from its YAML `links:` list."""

from pathlib import Path

import pytest

from vgpu.adapters.fake.gpus import FakeGpuFileError, FakeGpus
from vgpu.domain.inventory import GpuInfo
from vgpu.domain.topology import GpuLink, PcieLink, pair_scores

THREE = """\
gpus:
  - {uuid: GPU-a, name: NVIDIA H100, memory_mib: 81920}
  - {uuid: GPU-b, name: NVIDIA H100, memory_mib: 81920}
  - {uuid: GPU-c, name: NVIDIA H100, memory_mib: 81920}
"""


def _fake(tmp_path: Path, links: str) -> FakeGpus:
    path = tmp_path / "gpus.yaml"
    path.write_text(THREE + links)
    return FakeGpus.from_file(path)


def test_listed_links_are_reported_both_ways_and_others_as_cross_cpu(tmp_path: Path) -> None:
    fake = _fake(
        tmp_path,
        "links:\n  - {between: [GPU-a, GPU-b], pcie: single-switch, nvlinks: 4}\n",
    )
    links = {(link.source, link.target): link for link in fake.read_topology()}
    assert len(links) == 6
    assert links["GPU-a", "GPU-b"] == GpuLink("GPU-a", "GPU-b", PcieLink.SINGLE_SWITCH, 4)
    assert links["GPU-b", "GPU-a"].nvlinks == 4
    assert links["GPU-c", "GPU-a"] == GpuLink("GPU-c", "GPU-a", PcieLink.CROSS_CPU, 0)
    assert pair_scores(links.values()).scores["GPU-a"] == {"GPU-b": 450, "GPU-c": 10}


def test_an_asymmetric_pair_can_be_modelled(tmp_path: Path) -> None:
    fake = _fake(
        tmp_path,
        "links:\n  - {between: [GPU-a, GPU-b], pcie: same-cpu, nvlinks: 2, nvlinks_back: 1}\n",
    )
    assert pair_scores(fake.read_topology()).asymmetric == (("GPU-a", "GPU-b"),)


@pytest.mark.parametrize(
    ("links", "words"),
    [
        ("  - {between: [GPU-a, GPU-z], pcie: same-cpu}\n", "links[0].between: GPU-z is not"),
        ("  - {between: [GPU-a, GPU-a], pcie: same-cpu}\n", "names GPU-a twice"),
        (
            "  - {between: [GPU-a, GPU-b], pcie: same-cpu}\n"
            "  - {between: [GPU-b, GPU-a], pcie: same-cpu}\n",
            "links[1].between: this pair is already linked by links[0]",
        ),
        ("  - {between: [GPU-a, GPU-b], pcie: warp-drive}\n", "links.0.pcie"),
        ("  - {between: [GPU-a, GPU-b], pcie: same-cpu, nvlinks: 99}\n", "links.0.nvlinks"),
        ("  - {between: [GPU-a], pcie: same-cpu}\n", "links.0.between"),
    ],
)
def test_bad_links_are_refused_with_the_entry(tmp_path: Path, links: str, words: str) -> None:
    with pytest.raises(FakeGpuFileError) as caught:
        _fake(tmp_path, "links:\n" + links)
    assert words in str(caught.value)


def test_links_can_be_given_in_code() -> None:
    gpus = [GpuInfo("GPU-a", 0, "T4", 15360), GpuInfo("GPU-b", 1, "T4", 15360)]
    link = GpuLink("GPU-a", "GPU-b", PcieLink.HOST_BRIDGE)
    fake = FakeGpus(gpus, links=[link])
    assert link in fake.read_topology()
