"""HamiCoreRegions on a real directory tree: naming, cache files, mapping, writes, removal."""

import logging
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.monitor.regionbytes import (
    V1_SIZE,
    Spec,
    two_gpu_spec,
    v0_bytes,
    v1_bytes,
    write_region,
)
from vgpu.adapters.hamicore import HamiCoreRegions
from vgpu.ports.accounting import CacheDir, RegionNotReady, RegionUnreadable


def _entry(root: Path, name: str) -> CacheDir:
    regions = HamiCoreRegions(root)
    return next(e for e in regions.list_dirs() if e.path.name == name)


def test_directories_are_split_on_the_first_underscore(tmp_path: Path) -> None:
    (tmp_path / "uid-1_main").mkdir()
    (tmp_path / "uid-2_side_car").mkdir()
    (tmp_path / "a-file_main").write_text("")

    found = HamiCoreRegions(tmp_path).list_dirs()

    assert [(e.pod_uid, e.container) for e in found] == [("uid-1", "main"), ("uid-2", "side_car")]
    assert found[0].modified == os.stat(tmp_path / "uid-1_main").st_mtime


@pytest.mark.parametrize("name", ["nounderscore", "_main", "uid-1_"])
def test_badly_named_directories_are_skipped_with_one_warning(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / name).mkdir()
    regions = HamiCoreRegions(tmp_path)

    with caplog.at_level(logging.WARNING):
        assert regions.list_dirs() == []
        assert regions.list_dirs() == []

    assert [r.getMessage() for r in caplog.records] == [
        f"skipping {tmp_path / name}: not named <pod uid>_<container>"
    ]


def test_a_missing_root_lists_nothing(tmp_path: Path) -> None:
    assert HamiCoreRegions(tmp_path / "absent").list_dirs() == []


def test_the_cache_file_is_decoded(tmp_path: Path) -> None:
    write_region(tmp_path / "uid-1_main", v1_bytes(two_gpu_spec()))

    region = HamiCoreRegions(tmp_path).read(_entry(tmp_path, "uid-1_main"))

    assert (region.layout, region.minor, [p.pid for p in region.processes]) == (1, 2, [17, 18, 19])


def test_a_layout_0_file_is_decoded(tmp_path: Path) -> None:
    write_region(tmp_path / "uid-1_main", v0_bytes(two_gpu_spec()))

    assert HamiCoreRegions(tmp_path).read(_entry(tmp_path, "uid-1_main")).layout == 0


@pytest.mark.parametrize("files", [[], ["libvgpu.so"], ["notes.txt"]])
def test_a_directory_without_a_cache_file_is_not_ready(tmp_path: Path, files: list[str]) -> None:
    folder = tmp_path / "uid-1_main"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("")

    with pytest.raises(RegionNotReady, match=r"has no \.cache file yet"):
        HamiCoreRegions(tmp_path).read(_entry(tmp_path, "uid-1_main"))


def test_more_than_two_cache_and_library_files_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "uid-1_main"
    write_region(folder, v1_bytes(two_gpu_spec()), name="a.cache")
    (folder / "b.cache").write_bytes(b"")

    with pytest.raises(RegionUnreadable, match="holds 3 cache/library files, expected at most 2"):
        HamiCoreRegions(tmp_path).read(_entry(tmp_path, "uid-1_main"))


def test_an_empty_or_corrupt_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    empty = write_region(tmp_path / "uid-1_main", b"")
    bad = write_region(tmp_path / "uid-2_main", b"\x00" * 64)
    regions = HamiCoreRegions(tmp_path)

    with pytest.raises(RegionUnreadable, match=re.escape(f"{empty} is empty")):
        regions.read(_entry(tmp_path, "uid-1_main"))
    with pytest.raises(RegionUnreadable, match=re.escape(f"{bad}: wrong magic 0")):
        regions.read(_entry(tmp_path, "uid-2_main"))


def test_a_directory_removed_after_listing_is_reported_vanished(tmp_path: Path) -> None:
    folder = tmp_path / "uid-1_main"
    write_region(folder, v1_bytes(two_gpu_spec()))
    entry = _entry(tmp_path, "uid-1_main")
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()

    with pytest.raises(RegionUnreadable, match="vanished while being read"):
        HamiCoreRegions(tmp_path).read(entry)


def test_a_mapped_file_that_shrinks_is_dropped_before_it_is_touched(tmp_path: Path) -> None:
    path = write_region(tmp_path / "uid-1_main", v1_bytes(two_gpu_spec()))
    regions = HamiCoreRegions(tmp_path)
    entry = _entry(tmp_path, "uid-1_main")
    regions.read(entry)
    os.truncate(path, 100)

    with pytest.raises(RegionUnreadable, match=f"shrank from {V1_SIZE + 1} to 100 bytes"):
        regions.read(entry)


def test_a_region_replaced_by_a_new_file_is_read_afresh(tmp_path: Path) -> None:
    folder = tmp_path / "uid-1_main"
    old = write_region(folder, v1_bytes(two_gpu_spec(priority=1)), name="old.cache")
    regions = HamiCoreRegions(tmp_path)
    entry = _entry(tmp_path, "uid-1_main")
    assert regions.read(entry).priority == 1
    old.unlink()  # the plugin wipes the directory at the next Allocate
    write_region(folder, v1_bytes(two_gpu_spec(priority=0)), name="new.cache")

    assert regions.read(entry).priority == 0


def test_a_mapped_region_follows_hami_cores_writes(tmp_path: Path) -> None:
    path = write_region(tmp_path / "uid-1_main", v1_bytes(two_gpu_spec(recent_kernel=2)))
    regions = HamiCoreRegions(tmp_path)
    entry = _entry(tmp_path, "uid-1_main")
    assert regions.read(entry).recent_kernel == 2
    with path.open("r+b") as f:  # as HAMi-core would, through its own mapping
        f.seek(2_008_904)
        f.write(struct.pack("<i", 7))

    assert regions.read(entry).recent_kernel == 7


@pytest.mark.parametrize(
    ("make", "kernel_at", "switch_at"),
    [(v1_bytes, 2_008_904, 2_008_900), (v0_bytes, 1_197_888, 1_197_884)],
)
def test_feedback_writes_change_exactly_their_four_bytes(
    tmp_path: Path, make: Callable[[Spec], bytearray], kernel_at: int, switch_at: int
) -> None:
    before = bytes(make(two_gpu_spec(recent_kernel=2, utilization_switch=1)))
    path = write_region(tmp_path / "uid-1_main", before)
    regions = HamiCoreRegions(tmp_path, writable=True)
    entry = _entry(tmp_path, "uid-1_main")

    regions.set_recent_kernel(entry, -1)
    regions.set_utilization_switch(entry, 0)
    regions.close()

    after = path.read_bytes()
    assert struct.unpack_from("<i", after, kernel_at) == (-1,)
    assert struct.unpack_from("<i", after, switch_at) == (0,)
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert changed and all(
        kernel_at <= i < kernel_at + 4 or switch_at <= i < switch_at + 4 for i in changed
    )


def test_a_read_only_adapter_refuses_to_write(tmp_path: Path) -> None:
    path = write_region(tmp_path / "uid-1_main", v1_bytes(two_gpu_spec()))
    regions = HamiCoreRegions(tmp_path)

    with pytest.raises(RegionUnreadable, match=re.escape(f"{path} is mapped read-only")):
        regions.set_recent_kernel(_entry(tmp_path, "uid-1_main"), 0)


def test_a_file_it_may_not_write_is_still_read_without_feedback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_region(tmp_path / "uid-1_main", v1_bytes(two_gpu_spec()))
    real_open = os.open

    def refuse_writing(file: Path, flags: int) -> int:
        if flags & os.O_RDWR:  # as for a file of another user, mode 0644
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, flags)

    monkeypatch.setattr(os, "open", refuse_writing)
    regions = HamiCoreRegions(tmp_path, writable=True)
    entry = _entry(tmp_path, "uid-1_main")

    with caplog.at_level(logging.WARNING):
        assert regions.read(entry).priority == 0
    with pytest.raises(RegionUnreadable, match="mapped read-only"):
        regions.set_utilization_switch(entry, 0)
    assert f"{path} is not writable here: no priority feedback for it" in caplog.text


def test_remove_deletes_the_directory_and_its_mapping(tmp_path: Path) -> None:
    folder = tmp_path / "uid-1_main"
    write_region(folder, v1_bytes(two_gpu_spec()))
    regions = HamiCoreRegions(tmp_path)
    entry = _entry(tmp_path, "uid-1_main")
    regions.read(entry)

    regions.remove(entry)
    regions.remove(entry)  # gone already is fine

    assert not folder.exists()
    assert regions.list_dirs() == []


def test_a_directory_removed_by_someone_else_releases_its_mapping(tmp_path: Path) -> None:
    folder = tmp_path / "uid-1_main"
    path = write_region(folder, v1_bytes(two_gpu_spec()))
    regions = HamiCoreRegions(tmp_path)
    regions.read(_entry(tmp_path, "uid-1_main"))
    mapped = {p for p in _open_mappings() if p == str(path)}
    assert mapped, "the region should be mapped after a read"

    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    assert regions.list_dirs() == []

    assert str(path) not in {p.removesuffix(" (deleted)") for p in _open_mappings()}


def _open_mappings() -> set[str]:
    """Paths of the files this process has mapped (Linux /proc/self/maps)."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines if len(line.split(maxsplit=5)) == 6}
