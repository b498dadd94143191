"""Reading what a device plugin served, so a tenant's erased annotations do not hide a holder."""

from pathlib import Path

from tests.e2e.faults.invariants import holdings
from tests.e2e.faults.served import served_holdings, with_served
from tests.e2e.k8s_emulator import pod_manifest
from vgpu.domain import Usage
from vgpu.domain.trust import ServedGrant, encode_served_record


def running(name: str, uid: str, phase: str = "Running", **annotations: str) -> dict[str, object]:
    pod = pod_manifest(
        "default",
        name,
        limits={"nvidia.com/gpu": 1},
        annotations=annotations,
        node_name="n1",
        phase=phase,
    )
    pod["metadata"]["uid"] = uid
    return pod


def test_a_pod_whose_tenant_erased_its_grant_still_holds_what_was_served(tmp_path: Path) -> None:
    record = tmp_path / "served.json"
    record.write_text(
        encode_served_record(
            "n1",
            [
                ServedGrant("u1", "default/erased", "GPU-a,NVIDIA,6000,0:;"),
                ServedGrant("u2", "default/done", "GPU-a,NVIDIA,4000,0:;"),
                ServedGrant("u3", "default/gone", "GPU-a,NVIDIA,4000,0:;"),
            ],
        )
    )
    pods = [
        running("erased", "u1"),  # the tenant removed hami.io/vgpu-devices-allocated
        running("done", "u2", phase="Succeeded"),
        running("new", "u4", **{"hami.io/vgpu-node": "n1",
                                "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,6000,0:;"}),
    ]  # fmt: skip

    counted = with_served(holdings(pods)[0], served_holdings(record, pods))

    assert sorted((h.pod, h.node, h.footprint["GPU-a"]) for h in counted) == [
        ("default/erased", "n1", Usage(1, 6000, 0)),
        ("default/new", "n1", Usage(1, 6000, 0)),
    ]


def test_no_record_yet_adds_nothing(tmp_path: Path) -> None:
    assert served_holdings(tmp_path / "served.json", [running("a", "u1")]) == []
