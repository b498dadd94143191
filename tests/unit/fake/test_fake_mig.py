"""The fake GPU inventory models MIG instances: profiles, placements, overlaps (docs/protocol.md#mig-instance-lifecycle)."""

from pathlib import Path

import pytest

from vgpu.adapters.fake.gpus import FakeGpuFileError, FakeGpus
from vgpu.domain.mig import MigPlacement
from vgpu.ports.gpu import MigError

A100 = """\
gpus:
  - uuid: GPU-a
    name: NVIDIA A100-SXM4-40GB
    memory_mib: 40960
    mig: true
    mig_profiles:
      - name: 1g.5gb
        slices: 1
        memory_mib: 4864
        instances: 7
        placements: [{start: 0, size: 1}, {start: 1, size: 1}, {start: 2, size: 1},
                     {start: 3, size: 1}, {start: 4, size: 1}, {start: 5, size: 1},
                     {start: 6, size: 1}]
      - name: 3g.20gb
        slices: 3
        memory_mib: 19968
        instances: 2
        placements: [{start: 0, size: 4}, {start: 4, size: 4}]
      - name: 7g.40gb
        slices: 7
        memory_mib: 40192
        placements: [{start: 0, size: 8}]
  - uuid: GPU-b
    name: Tesla T4
    memory_mib: 15360
"""


@pytest.fixture
def fake(tmp_path: Path) -> FakeGpus:
    path = tmp_path / "gpus.yaml"
    path.write_text(A100)
    return FakeGpus.from_file(path)


def test_profiles_are_listed_for_gpus_in_mig_mode_only(fake: FakeGpus) -> None:
    profiles = fake.mig_profiles()
    assert list(profiles) == ["GPU-a"]
    assert [(p.name, p.memory_mib, len(p.placements)) for p in profiles["GPU-a"]] == [
        ("1g.5gb", 4864, 7),
        ("3g.20gb", 19968, 2),
        ("7g.40gb", 40192, 1),
    ]


def test_instances_are_created_at_free_placements_and_destroyed(fake: FakeGpus) -> None:
    big = fake.create_mig_instance("GPU-a", "3g.20gb", MigPlacement(4, 4))
    small = fake.create_mig_instance("GPU-a", "1g.5gb", MigPlacement(0, 1))
    assert big.mig_uuid != small.mig_uuid and big.gpu_instance_id != small.gpu_instance_id
    assert fake.mig_instances() == [big, small]

    fake.destroy_mig_instance(big)
    fake.destroy_mig_instance(big)  # already gone: fine
    assert fake.mig_instances() == [small]
    assert fake.create_mig_instance("GPU-a", "1g.5gb", MigPlacement(5, 1)).placement.start == 5


def test_taken_slices_are_refused_until_freed(fake: FakeGpus) -> None:
    first = fake.create_mig_instance("GPU-a", "1g.5gb", MigPlacement(1, 1))
    with pytest.raises(MigError, match=r"3g\.20gb at 0\+4: slices are taken by 1g\.5gb"):
        fake.create_mig_instance("GPU-a", "3g.20gb", MigPlacement(0, 4))
    with pytest.raises(MigError, match="slices are taken"):
        fake.create_mig_instance("GPU-a", "7g.40gb", MigPlacement(0, 8))
    fake.destroy_mig_instance(first)
    fake.create_mig_instance("GPU-a", "7g.40gb", MigPlacement(0, 8))


@pytest.mark.parametrize(
    ("gpu", "profile", "placement", "words"),
    [
        ("GPU-a", "3g.20gb", MigPlacement(2, 4), "invalid placement"),
        ("GPU-a", "2g.10gb", MigPlacement(0, 2), "offers no such profile"),
        ("GPU-b", "1g.5gb", MigPlacement(0, 1), "no such GPU in MIG mode"),
        ("GPU-z", "1g.5gb", MigPlacement(0, 1), "no such GPU in MIG mode"),
    ],
)
def test_what_nvml_would_refuse_is_refused(
    fake: FakeGpus, gpu: str, profile: str, placement: MigPlacement, words: str
) -> None:
    with pytest.raises(MigError, match=words):
        fake.create_mig_instance(gpu, profile, placement)
    assert fake.mig_instances() == []


def test_profiles_on_a_gpu_without_mig_are_a_file_error(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(A100.replace("    mig: true\n", ""))
    with pytest.raises(FakeGpuFileError, match=r"gpus\[0\] \(uuid GPU-a\): mig_profiles needs mig"):
        FakeGpus.from_file(path)


def test_a_placement_of_size_zero_is_a_file_error(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(A100.replace("{start: 0, size: 8}", "{start: 0, size: 0}"))
    with pytest.raises(FakeGpuFileError, match="size"):
        FakeGpus.from_file(path)
