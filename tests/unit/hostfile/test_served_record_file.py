"""The served record on disk: replaced whole, read back, damage and write faults named."""

import os
from pathlib import Path

import pytest

from vgpu.adapters.hostfile import JsonServedRecord
from vgpu.domain.trust import ServedGrant
from vgpu.ports.served import RecordCorrupt, RecordError

GRANT = ServedGrant("u1", "default/a", "GPU-a,NVIDIA,3000,30:;", served_at="2026-01-01T00:00:00Z")
OTHER = ServedGrant("u2", "default/b", "GPU-b,NVIDIA,1000,0:;", signed=False)


def test_what_is_saved_reads_back_and_the_directory_is_made(tmp_path: Path) -> None:
    record = JsonServedRecord(tmp_path / "state" / "vgpu")

    assert record.load() == []
    record.save("gpu-node-1", [GRANT, OTHER])

    assert JsonServedRecord(tmp_path / "state" / "vgpu").load() == [GRANT, OTHER]
    assert record.location == str(tmp_path / "state" / "vgpu" / "served.json")


def test_a_save_replaces_the_whole_file_and_leaves_no_temporary_behind(tmp_path: Path) -> None:
    record = JsonServedRecord(tmp_path)
    record.save("gpu-node-1", [GRANT, OTHER])
    inode = os.stat(tmp_path / "served.json").st_ino

    record.save("gpu-node-1", [OTHER])

    assert record.load() == [OTHER]
    assert os.listdir(tmp_path) == ["served.json"]
    # renamed over, not rewritten in place: a reader never sees half a file
    assert os.stat(tmp_path / "served.json").st_ino != inode


def test_a_save_that_cannot_be_written_says_where_and_why(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")

    with pytest.raises(RecordError, match=f"cannot write served record {blocker}/served.json"):
        JsonServedRecord(blocker).save("gpu-node-1", [GRANT])


def test_a_damaged_file_is_corrupt_and_can_be_set_aside(tmp_path: Path) -> None:
    (tmp_path / "served.json").write_text('{"version": 1, "node": "n", "pods": {"u": 3')
    record = JsonServedRecord(tmp_path)

    with pytest.raises(RecordCorrupt, match=r"served\.json does not read: not JSON"):
        record.load()
    aside = record.set_aside()

    assert Path(aside).read_text().startswith('{"version": 1')
    assert aside.startswith(f"{tmp_path}/served.json.corrupt-")
    assert record.load() == []


def test_bytes_that_are_not_text_are_corrupt_too(tmp_path: Path) -> None:
    (tmp_path / "served.json").write_bytes(b"\xff\xfe\x00garbage")

    with pytest.raises(RecordCorrupt, match="not UTF-8"):
        JsonServedRecord(tmp_path).load()


def test_a_record_that_cannot_be_read_at_all_is_not_mistaken_for_an_empty_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "served.json").mkdir()  # reading it fails with an OS error, not "missing"

    with pytest.raises(RecordError, match="cannot read served record") as err:
        JsonServedRecord(tmp_path).load()
    assert not isinstance(err.value, RecordCorrupt)
