"""The DRA driver's host files: CDI specs written whole or not at all, the static specs read,
per-claim directories, and the prepared-claims record; every fault names the path and why."""

import json
import os
from pathlib import Path

import pytest

from vgpu.adapters.hostfile import (
    CdiSpecFiles,
    ClaimDirs,
    PreparedStore,
    StaticCdiCatalog,
    cdi_specs,
)
from vgpu.ports.dra import HostFileError

UID = "8c1f5a6e-3b1d-4c9e-9a61-2f0b7d5e4c11"
SPEC = {"cdiVersion": "0.5.0", "kind": "vgpu.io/claim", "devices": [{"name": "x", "containerEdits": {"env": ["A=1"]}}]}


def test_a_claims_spec_is_one_file_named_for_its_kind_and_reads_back(tmp_path: Path) -> None:
    specs = CdiSpecFiles(tmp_path / "cdi")

    path = specs.write(UID, SPEC)

    assert path == str(tmp_path / "cdi" / f"vgpu.io-claim_{UID}.json")
    assert json.loads(Path(path).read_text()) == SPEC
    assert specs.read(UID) == SPEC
    assert specs.claim_uids() == [UID]
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"  # the runtime reads it as any user


def test_rewriting_a_spec_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    specs = CdiSpecFiles(tmp_path)
    first = specs.write(UID, SPEC)
    inode = os.stat(first).st_ino

    specs.write(UID, {**SPEC, "devices": []})

    assert specs.read(UID) == {**SPEC, "devices": []}
    assert os.listdir(tmp_path) == [f"vgpu.io-claim_{UID}.json"]
    assert os.stat(first).st_ino != inode  # renamed over: a runtime never reads half a spec


def test_a_spec_that_cannot_be_written_is_a_clear_error_and_the_old_spec_stays(
    tmp_path: Path,
) -> None:
    specs = CdiSpecFiles(tmp_path)
    specs.write(UID, SPEC)
    # the temporary file's path taken by a directory: the write fails, even for root
    (tmp_path / f"vgpu.io-claim_{UID}.json.tmp").mkdir()

    with pytest.raises(HostFileError, match=r"cannot write CDI spec .*: Is a directory"):
        specs.write(UID, {**SPEC, "devices": []})

    assert specs.read(UID) == SPEC


def test_a_uid_that_could_escape_the_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HostFileError, match="cannot name a CDI spec file"):
        CdiSpecFiles(tmp_path).write("../etc/passwd", SPEC)
    with pytest.raises(HostFileError, match="cannot name a host directory"):
        ClaimDirs(tmp_path, tmp_path / "lock").prepare(UID, ["../x"], {})


def test_removing_a_spec_twice_is_harmless_and_others_files_are_not_ours(tmp_path: Path) -> None:
    specs = CdiSpecFiles(tmp_path)
    specs.write(UID, SPEC)
    (tmp_path / "nvidia.yaml").write_text("kind: nvidia.com/gpu\n")

    specs.remove(UID)
    specs.remove(UID)

    assert specs.read(UID) is None
    assert specs.claim_uids() == []
    assert os.listdir(tmp_path) == ["nvidia.yaml"]


def test_the_static_catalog_lists_the_devices_of_one_kind_from_json_and_yaml(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    (etc / "nvidia.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
        "  - name: '0'\n  - name: GPU-a\n  - name: all\n"
    )
    (run / "other.json").write_text(json.dumps({"kind": "example.com/nic", "devices": [{"name": "eth0"}]}))
    (run / "broken.json").write_text("{not json")
    (run / "odd.json").write_text(json.dumps({"kind": "nvidia.com/gpu", "devices": 5}))
    (run / "notes.txt").write_text("kind: nvidia.com/gpu")

    catalog = StaticCdiCatalog([etc, run, tmp_path / "missing"])

    assert catalog.device_names("nvidia.com/gpu") == {"0", "GPU-a", "all"}
    assert catalog.device_names("example.com/nic") == {"eth0"}


def test_the_static_catalog_reads_a_spec_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every Prepare asks; NVIDIA's spec is tens of KB of YAML, slow to parse each time
    spec = tmp_path / "nvidia.yaml"
    spec.write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: '0'\n")
    parsed = []
    real_load = cdi_specs.yaml.load

    def load(*args: object, **kwargs: object) -> object:
        parsed.append(args)
        return real_load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cdi_specs.yaml, "load", load)
    catalog = StaticCdiCatalog([tmp_path])

    assert [catalog.device_names("nvidia.com/gpu") for _ in range(3)] == [{"0"}] * 3
    assert len(parsed) == 1
    spec.write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: '0'\n"
                    "  - name: '1'\n")
    assert catalog.device_names("nvidia.com/gpu") == {"0", "1"}
    spec.unlink()
    assert catalog.device_names("nvidia.com/gpu") == set()


def test_claim_dirs_are_open_to_any_user_and_claim_json_sits_beside_them(tmp_path: Path) -> None:
    dirs = ClaimDirs(tmp_path, tmp_path / "lock")

    dirs.prepare(UID, ["share-1", "share-2"], {"claim": {"name": "c"}})

    share = dirs.path(UID, "share-1")
    assert oct(os.stat(tmp_path / "lock").st_mode & 0o777) == "0o777"  # HAMi-core's lock dir
    assert share == str(tmp_path / "vgpu" / "claims" / UID / "share-1")
    assert oct(os.stat(share).st_mode & 0o777) == "0o777"
    assert oct(os.stat(dirs.path(UID, "share-2")).st_mode & 0o777) == "0o777"
    claim_json = tmp_path / "vgpu" / "claims" / UID / "claim.json"
    assert json.loads(claim_json.read_text()) == {"claim": {"name": "c"}}
    assert dirs.read_info(UID) == claim_json.read_text()
    assert not (Path(share) / "claim.json").exists()  # the mounted dir holds no file we trust
    assert dirs.claim_uids() == [UID]

    dirs.remove(UID)
    dirs.remove(UID)
    assert dirs.claim_uids() == []
    assert dirs.read_info(UID) is None


def test_an_admin_claims_directory_holds_only_its_claim_json(tmp_path: Path) -> None:
    dirs = ClaimDirs(tmp_path, tmp_path / "lock")

    dirs.prepare(UID, [], {"claim": {"name": "debug"}})

    assert os.listdir(tmp_path / "vgpu" / "claims" / UID) == ["claim.json"]
    assert not (tmp_path / "lock").exists()  # no HAMi-core, no lock directory
    assert dirs.claim_uids() == [UID]


def test_the_prepared_record_saves_whole_and_damaged_bytes_still_read_as_text(tmp_path: Path) -> None:
    store = PreparedStore(tmp_path / "state")
    assert store.load() is None

    store.save('{"version": 1}')
    assert store.load() == '{"version": 1}'
    assert store.location == str(tmp_path / "state" / "dra-prepared.json")

    (tmp_path / "state" / "dra-prepared.json").write_bytes(b"\xff\xfe{")
    assert store.load() == "\ufffd\ufffd{"
    aside = store.set_aside()
    assert Path(aside).name.startswith("dra-prepared.json.corrupt-")
    assert store.load() is None


def test_a_record_that_cannot_be_written_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(HostFileError, match=r"cannot write .*not-a-dir/dra-prepared.json"):
        PreparedStore(blocker).save("{}")
