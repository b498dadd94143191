"""A tenant cannot make the occupancy record forget a pod, against a real
`vgpu scheduler` process killed with SIGKILL and started again.

The tenant owns pods but not Nodes. With no admission policy (the emulator has none) it can
create a pod bound straight to a node, carrying grant annotations of its own making (counted:
the pod is bound and asks for `nvidia.com/gpu`), and edit the annotations of its running pods.
"""

import json
import uuid
from typing import Any

from tests.e2e.faults.cluster import FaultCluster, LockReleaser, pods_path
from tests.e2e.faults.test_served import running
from tests.e2e.faults.test_tenant_proof import placed, record, run, tenant_edit
from tests.e2e.scheduler.harness import wait_until
from tests.record_filler import TIME, filler_item_bytes, phantom_grant

ALLOCATED = "hami.io/vgpu-devices-allocated"
CARD_MIB = 24576


def bound_by_the_tenant(
    faults: FaultCluster, name: str, allocated: str, time: str = TIME, uid: str = ""
) -> dict[str, Any]:
    """A running pod the tenant bound to n1 itself, with grant annotations it wrote."""
    notes = {"hami.io/vgpu-node": "n1", "hami.io/vgpu-time": time, ALLOCATED: allocated}
    return faults.api.create(pods_path(), running(name, uid or str(uuid.uuid4()), **notes))


def recorded_uids(faults: FaultCluster) -> set[str]:
    text = record(faults, "n1")
    if not text:
        return set()
    data = json.loads(text)
    return set(data.get("pods", {})) | set(data.get("overflow", {}))


def test_a_huge_vgpu_time_does_not_let_a_restart_forget_the_tenants_next_pod(
    faults: FaultCluster,
) -> None:
    """The issue's scenario: one pod whose 130,851-byte `hami.io/vgpu-time` was copied into the
    record filled it; the next pod (12,000 MiB) was counted in memory only; the tenant edited it,
    the scheduler restarted, counted 100 MiB, and granted 13,000 MiB on the 24,576 MiB card."""
    faults.add_node("n1", cards=1, memory=CARD_MIB)
    replica = faults.replica("scheduler")
    filler = bound_by_the_tenant(faults, "filler", "GPU-n1-0,NVIDIA,100,0:;", time="1" * 130_851)
    filler_uid = filler["metadata"]["uid"]
    assert wait_until(lambda: filler_uid in recorded_uids(faults), 10), faults.logs()
    assert len(record(faults, "n1")) < 1024, "the tenant's vgpu-time was copied into the record"

    with LockReleaser(faults.api).running():
        assert placed(replica, faults.create_pod("big", 12000), "n1"), faults.logs()
        run(faults, "big")
        big_uid = faults.pod("big")["metadata"]["uid"]
        assert big_uid in recorded_uids(faults), faults.logs()
        tenant_edit(faults, "big", {ALLOCATED: None})
        replica.process.kill()
        replica.process.start()

        over = placed(replica, faults.create_pod("over", 13000), "n1")
    assert not over, "13,000 MiB granted beside 12,100 on a 24,576 MiB card\n" + faults.logs()

    # an ended pod's entry leaves at the recorder's next pass, with nothing else to write
    faults.api.merge_patch(f"{pods_path()}/filler", {"status": {"phase": "Succeeded"}})
    assert wait_until(lambda: filler_uid not in recorded_uids(faults), 10), record(faults, "n1")


FILLERS = 33


def test_a_record_the_tenant_filled_to_the_byte_still_makes_a_restart_count_enough(
    faults: FaultCluster,
) -> None:
    """Entries within their bound, but enough of them to leave no room for the next pod's:
    whatever the tenant then edits, a scheduler restarted with SIGKILL grants nothing that
    over-fills the card."""
    faults.add_node("n1", cards=1, memory=CARD_MIB)
    replica = faults.replica("scheduler")
    each = filler_item_bytes(FILLERS, room=60)
    fillers = [f"fill-{i:02}" for i in range(FILLERS)]
    uids = [str(uuid.uuid4()) for _ in fillers]
    for name, uid in zip(fillers, uids, strict=True):
        bound_by_the_tenant(faults, name, phantom_grant(name, uid, each), uid=uid)
    assert wait_until(lambda: recorded_uids(faults) == set(uids), 20), faults.logs()

    with LockReleaser(faults.api).running():
        assert placed(replica, faults.create_pod("big", 12000), "n1"), faults.logs()
        run(faults, "big")
        for name in ["big", *fillers]:
            tenant_edit(faults, name, {ALLOCATED: None})
        replica.process.kill()
        replica.process.start()

        over = placed(replica, faults.create_pod("over", 13000), "n1")
    assert not over, "13,000 MiB granted beside 12,000 on a 24,576 MiB card\n" + faults.logs()
