"""Issue 17: occupancy that tenants cannot erase, with no admission policy (the emulator has
none), against real `vgpu scheduler` processes.

1. A cluster that already runs HAMi-scheduled pods (unsigned grants, bound, Running, asking
   `nvidia.com/gpu`) when vgpu starts, on default settings and with `takeover.from_hami`: no
   new pod is placed over them.
2. A tenant garbles its running pod's signature, sets `hami.io/bind-phase: failed`, or removes
   its grant, then the scheduler is killed with SIGKILL and restarted: the cards stay counted
   and a pod that would over-fill them is not placed.
3. A deposed leader's grant PATCH, held up by the network, lands after the new leader gave the
   card away: the late grant is revoked, the new leader's bind of that pod fails, and no card
   is over capacity.

The checker keeps a `Witness`: what the pods hold is read from the API objects as first seen
on each bound pod, never from what the schedulers publish.
"""

import threading
from typing import Any

import pytest

from tests.e2e.faults.cluster import FaultCluster, LockReleaser, Replica, pods_path
from tests.e2e.faults.invariants import Witness, assert_capacity, assert_ledgers_agree
from tests.e2e.faults.proxy import Action, Rule
from tests.e2e.k8s_emulator import pod_manifest
from tests.e2e.scheduler.harness import wait_until
from vgpu.domain.trust import OCCUPANCY_ANNOTATION

ALLOCATED = "hami.io/vgpu-devices-allocated"
LATE_PATCH_DELAY = 8.0  # seconds the deposed leader's grant PATCH is held by the network


def hami_pod(
    faults: FaultCluster, name: str, node: str, memory: int, *, running: bool = True
) -> dict[str, Any]:
    """A pod HAMi's scheduler placed: its unsigned grant, bound and started unless not
    `running` (then HAMi has written the grant and not bound it yet)."""
    notes = {
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-time": "1750000000",
        ALLOCATED: f"GPU-{node}-0,NVIDIA,{memory},0:;",
        "hami.io/vgpu-devices-to-allocate": ";" if running else f"GPU-{node}-0,NVIDIA,{memory},0:;",
        "hami.io/bind-phase": "success" if running else "allocating",
    }
    manifest = pod_manifest(
        "default",
        name,
        limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": memory},
        annotations=notes,
        node_name=node if running else None,
        scheduler_name="hami-scheduler",
        phase="Running" if running else "Pending",
    )
    return faults.api.create(pods_path(), manifest)


def placed(replica: Replica, pod: dict[str, Any], node: str) -> bool:
    """kube-scheduler's cycle: filter, then bind where the extender said."""
    reply = replica.process.try_filter(pod, [node], timeout=30)
    if reply is None or reply.get("NodeNames") != [node]:
        return False
    return replica.process.try_bind(pod, node, timeout=30) == ""


def run(faults: FaultCluster, name: str) -> None:
    """The kubelet started the pod."""
    faults.api.merge_patch(f"{pods_path()}/{name}", {"status": {"phase": "Running"}})


def tenant_edit(faults: FaultCluster, name: str, annotations: dict[str, str | None]) -> None:
    faults.api.merge_patch(f"{pods_path()}/{name}", {"metadata": {"annotations": annotations}})


def record(faults: FaultCluster, node: str) -> str:
    found = faults.api.get(f"/api/v1/nodes/{node}") or {}
    return str((found.get("metadata", {}).get("annotations") or {}).get(OCCUPANCY_ANNOTATION, ""))


@pytest.mark.parametrize("takeover", [False, True], ids=["default settings", "takeover"])
def test_hamis_running_pods_are_counted_when_vgpu_starts(
    faults: FaultCluster, takeover: bool
) -> None:
    faults.add_node("n1", cards=1, memory=10000)
    faults.add_node("n2", cards=1, memory=10000)
    witness = Witness()
    running = hami_pod(faults, "hami-running", "n1", 8000)
    if takeover:  # HAMi has placed this one and not bound it yet: its grant holds n2 too
        hami_pod(faults, "hami-pending", "n2", 8000, running=False)
    assert_capacity(faults.api, witness)
    env = {"VGPU_TAKEOVER__FROM_HAMI": "true"} if takeover else {}
    replica = faults.replica("scheduler", env=env)

    newcomer = faults.create_pod("newcomer", 8000)
    reply = replica.process.try_filter(newcomer, ["n1", "n2"])
    assert reply is not None
    chosen = reply.get("NodeNames") or []
    assert "n1" not in chosen, f"placed over HAMi's running pod: {reply}\n{faults.logs()}"
    assert chosen == ([] if takeover else ["n2"]), reply
    assert "vgpu_unsigned_grants_counted 1.0" in replica.process.metrics_text()
    uid = running["metadata"]["uid"]
    assert wait_until(lambda: uid in record(faults, "n1"), 10), faults.logs()
    assert_capacity(faults.api, witness)
    assert_ledgers_agree(faults.api, faults.scrapes(replica), witness=witness)


EDITS: dict[str, dict[str, str | None]] = {
    "garbled": {"vgpu.io/grant-signature": "k20260101t0000:garbled"},
    "failed": {"hami.io/bind-phase": "failed"},
    "removed": {ALLOCATED: None},
}


def test_a_tenants_edit_of_its_running_pod_survives_a_kill_9_of_the_scheduler(
    faults: FaultCluster,
) -> None:
    nodes = {edit: f"n-{edit}" for edit in EDITS}
    for node in nodes.values():
        faults.add_node(node, cards=1, memory=10000)
    replica = faults.replica("scheduler")
    witness = Witness()
    with LockReleaser(faults.api).running():
        for edit, node in nodes.items():
            assert placed(replica, faults.create_pod(f"a-{edit}", 8000), node), faults.logs()
            run(faults, f"a-{edit}")
        assert_capacity(faults.api, witness)  # the witness sees every pod bound, as placed
        for edit, annotations in EDITS.items():
            tenant_edit(faults, f"a-{edit}", annotations)
        replica.process.kill()
        replica.process.start()

        broken = [
            f"{edit}: a pod was placed beside the 8000 MiB one on {node}"
            for edit, node in nodes.items()
            if placed(replica, faults.create_pod(f"b-{edit}", 8000), node)
        ]
    assert not broken, "\n".join(broken) + "\n" + faults.logs()
    assert_capacity(faults.api, witness)
    assert_ledgers_agree(faults.api, faults.scrapes(replica), witness=witness)


def test_a_deposed_leaders_late_grant_is_revoked_and_its_bind_fails(faults: FaultCluster) -> None:
    faults.add_node("n1", cards=1, memory=10000)
    first = faults.replica("replica-a", election=True, ready=False)
    second = faults.replica("replica-b", election=True, ready=False)
    old = faults.leader(first, second)
    new = second if old is first else first
    x = faults.create_pod("x", 6000)
    y = faults.create_pod("y", 6000)
    late = old.proxy.add(
        Rule(Action.DELAY, "PATCH", r"/pods/x$", times=1, seconds=LATE_PATCH_DELAY)
    )
    # kube-scheduler's filter of x reaches the old leader; it gives up waiting for the answer
    asked = threading.Thread(target=old.process.try_filter, args=(x, ["n1"], 2.0))
    asked.start()
    assert wait_until(lambda: late.hits == 1, 10), faults.logs()
    old.proxy.add(Rule(Action.RESPOND, None, r"/leases/", status=503))  # it cannot renew
    asked.join(10)
    assert wait_until(new.process.is_ready, 30), faults.logs()
    with LockReleaser(faults.api).running():
        assert placed(new, y, "n1"), faults.logs()
        landed = LATE_PATCH_DELAY + 10
        assert wait_until(lambda: old.proxy.finished(Action.DELAY, r"/pods/x$") == 1, landed)
        # kube-scheduler took x's filter answer from the old leader and asks the new one to bind
        error = new.process.try_bind(x, "n1")
    assert error, f"the new leader bound x beside y on one card:\n{faults.logs()}"
    assert wait_until(lambda: ALLOCATED not in faults.pod("x")["metadata"]["annotations"], 10)
    events = faults.api.list_items("/api/v1/namespaces/default/events")
    assert any(e.get("reason") == "GrantRevoked" for e in events), faults.logs()
    assert_capacity(faults.api)
    assert_ledgers_agree(faults.api, faults.scrapes(new))
