"""Reading the kubelet's device checkpoint as kubelets of both shapes write it."""

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from vgpu.adapters.kubelet.checkpoint import KubeletCheckpoint
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.domain.trust import DeviceAssignment
from vgpu.ports.kubelet import CheckpointUnreadable

A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
ENVS = {"NVIDIA_VISIBLE_DEVICES": A, "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m"}


def alloc_resp(envs: dict[str, str]) -> str:
    """`AllocResp` as the kubelet stores it: the answer's protobuf bytes, base64 in JSON."""
    return base64.b64encode(pb.ContainerAllocateResponse(envs=envs).SerializeToString()).decode()


def entry(uid: str, ids: Any, resource: str = "nvidia.com/gpu", **extra: Any) -> dict[str, Any]:
    return {"PodUID": uid, "ContainerName": "main", "ResourceName": resource, "DeviceIDs": ids,
            **extra}  # fmt: skip


def write(directory: Path, *entries: dict[str, Any]) -> None:
    document = {
        "Data": {
            "PodDeviceEntries": list(entries),
            "RegisteredDevices": {"nvidia.com/gpu": [f"{A}-0", f"{A}-1"]},
        },
        "Checksum": 2751386137,
    }
    (directory / "kubelet_internal_checkpoint").write_text(json.dumps(document))


def test_entries_read_with_device_ids_by_numa_node_and_the_answer_given(tmp_path: Path) -> None:
    write(
        tmp_path,
        entry("u1", {"0": [f"{A}-0"], "1": [f"{A}-1"]}, AllocResp=alloc_resp(ENVS)),
        entry("u2", {"-1": ["0000:3b:00.0"]}, resource="example.com/nic"),
    )

    found = KubeletCheckpoint(tmp_path).assignments()

    assert list(found) == [
        DeviceAssignment("u1", "main", "nvidia.com/gpu", (f"{A}-0", f"{A}-1"), ENVS),
        DeviceAssignment("u2", "main", "example.com/nic", ("0000:3b:00.0",), None),
    ]


def test_a_checkpoint_of_a_kubelet_before_1_20_lists_ids_without_numa(tmp_path: Path) -> None:
    write(tmp_path, entry("u1", [f"{A}-3"], AllocResp=alloc_resp(ENVS)))

    (found,) = KubeletCheckpoint(tmp_path).assignments()

    assert found.device_ids == (f"{A}-3",) and found.envs == ENVS


@pytest.mark.parametrize("answer", ["", "not base64!", base64.b64encode(b"\xff\xff\xff").decode()])
def test_an_answer_that_does_not_decode_leaves_the_envs_unknown(tmp_path: Path, answer: str) -> None:
    write(tmp_path, entry("u1", [f"{A}-3"], AllocResp=answer))

    (found,) = KubeletCheckpoint(tmp_path).assignments()

    assert found.envs is None and found.device_ids == (f"{A}-3",)


def test_no_checkpoint_yet_means_no_entries(tmp_path: Path) -> None:
    assert list(KubeletCheckpoint(tmp_path).assignments()) == []


def test_a_fresh_kubelet_writes_null_entries(tmp_path: Path) -> None:
    (tmp_path / "kubelet_internal_checkpoint").write_text(
        '{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":1}'
    )

    assert list(KubeletCheckpoint(tmp_path).assignments()) == []


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{garbage", "is not JSON"),
        ('{"Data": 5}', "no Data.PodDeviceEntries list"),
        ('{"Data": {"PodDeviceEntries": [7]}}', r"PodDeviceEntries\[0\] is not an object"),
        ('{"Data": {"PodDeviceEntries": [{"PodUID": "u"}]}}', "lacks PodUID, ContainerName"),
        (
            '{"Data": {"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c", '
            '"ResourceName": "r", "DeviceIDs": {"0": "GPU-a"}}]}}',
            "are not id lists",
        ),
    ],
)
def test_garbage_is_refused_naming_the_file_and_the_fault(
    tmp_path: Path, text: str, named: str
) -> None:
    (tmp_path / "kubelet_internal_checkpoint").write_text(text)

    with pytest.raises(CheckpointUnreadable, match=named) as err:
        KubeletCheckpoint(tmp_path).assignments()
    assert str(tmp_path / "kubelet_internal_checkpoint") in str(err.value)


def test_the_file_is_parsed_again_only_when_it_changed(tmp_path: Path) -> None:
    write(tmp_path, entry("u1", [f"{A}-0"]))
    checkpoint = KubeletCheckpoint(tmp_path)
    first = checkpoint.assignments()

    assert checkpoint.assignments() is first  # unchanged: the same parse

    write(tmp_path, entry("u1", [f"{A}-0"]), entry("u2", [f"{A}-1"]))
    os.utime(tmp_path / "kubelet_internal_checkpoint", ns=(1, 1))  # a new mtime, whatever the clock
    assert [e.pod_uid for e in checkpoint.assignments()] == ["u1", "u2"]
