"""Issue 8 item 4: a leader whose API link hangs must stop scheduling before another leads.

Two replicas with leader election (lease 4 s, renew deadline 3 s), each behind its own proxy.
Every new call of the leader hangs (its connection to the API is stuck) while kube-scheduler
keeps sending filters and binds to both replicas. At no moment may both report ready, at most
one of two pods that cannot share a card is placed, and no card ends up promised past its size
once the old leader's stuck calls are let through.
"""

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.e2e.faults.cluster import FaultCluster, LockReleaser, Replica
from tests.e2e.faults.invariants import assert_ledgers_agree, check_capacity, read_cluster
from tests.e2e.faults.proxy import Action, Rule
from tests.e2e.scheduler.harness import wait_until


def place(replica: Replica, pod: dict[str, Any], node: str) -> bool:
    """kube-scheduler's cycle against one replica: filter, then bind where it said."""
    reply = replica.process.try_filter(pod, [node], timeout=40)
    if reply is None or reply.get("NodeNames") != [node]:
        return False
    return replica.process.try_bind(pod, node, timeout=40) == ""


def test_a_leader_with_a_hung_api_link_is_fenced_before_the_standby_leads(
    faults: FaultCluster,
) -> None:
    faults.add_node("n1", cards=1, memory=10000, split=10)
    a = faults.replica("replica-a", election=True, ready=False)
    b = faults.replica("replica-b", election=True, ready=False)
    old = faults.leader(a, b)
    new = b if old is a else a
    x = faults.create_pod("x", 6000)
    y = faults.create_pod("y", 6000)
    both_ready: list[str] = []
    stop = threading.Event()

    def watch_readiness() -> None:
        while not stop.is_set():
            if old.process.is_ready() and new.process.is_ready():
                both_ready.append("both replicas answered /readyz 200 at once")
            stop.wait(0.05)

    watcher = threading.Thread(target=watch_readiness, daemon=True)
    with LockReleaser(faults.api).running(), ThreadPoolExecutor(max_workers=1) as pool:
        watcher.start()
        old.proxy.add(Rule(Action.HANG))
        x_placed = pool.submit(place, old, x, "n1")
        assert wait_until(lambda: old.proxy.took(Action.HANG, r"/pods/x\b") > 0, 10)
        assert wait_until(new.process.is_ready, 40), faults.logs()
        y_placed = place(new, y, "n1")
        old.proxy.clear()  # the link recovers: whatever the old leader had in flight lands
        placed = [x_placed.result(), y_placed]
        stop.set()
        watcher.join(5)

    broken = [str(v) for v in check_capacity(*read_cluster(faults.api))]
    if both_ready:
        broken.append(f"{both_ready[0]} ({len(both_ready)} samples 50 ms apart)")
    if all(placed):
        broken.append("two 6000 MiB pods bound to one 10000 MiB card")
    assert not broken, "\n".join(broken)
    fresh = faults.replica("fresh")  # no election: it reads the cluster and publishes its ledger
    assert_ledgers_agree(faults.api, faults.scrapes(new, fresh))
