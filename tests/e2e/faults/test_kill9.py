"""kill -9 of the scheduler at a random point of a concurrent workload, then a restart.

Seeded (`VGPU_FAULT_SEED`): pods are filtered and bound concurrently while, after a random
moment, the scheduler gets SIGKILL: no shutdown code runs, whatever call was half done. After
the restart the cards are not over-committed, the rebuilt ledger is exactly what the API says,
and the pods kube-scheduler would retry are placed without breaking either.
"""

import os
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.e2e.faults.cluster import FaultCluster, LockReleaser, Replica
from tests.e2e.faults.invariants import assert_capacity, assert_ledgers_agree

SEED = int(os.environ.get("VGPU_FAULT_SEED", "1"))
RUNS = 3


def cycle(replica: Replica, pod: dict[str, Any], nodes: list[str]) -> bool:
    """filter then bind; False when the scheduler did not place or bind it (or is dead)."""
    reply = replica.process.try_filter(pod, nodes, timeout=10)
    chosen = (reply or {}).get("NodeNames") or []
    return len(chosen) == 1 and replica.process.try_bind(pod, chosen[0], timeout=10) == ""


@pytest.mark.parametrize("run", range(RUNS))
def test_a_killed_scheduler_restarts_into_the_api_s_state(faults: FaultCluster, run: int) -> None:
    rng = random.Random(f"kill9/{SEED}/{run}")
    for name in ("n1", "n2"):
        faults.add_node(name, cards=2, memory=10000, split=4)
    replica = faults.replica("scheduler")
    pods = [
        faults.create_pod(f"p{i}", memory=rng.choice((2000, 3000, 5000, 7000)), cores=10)
        for i in range(16)
    ]
    with LockReleaser(faults.api).running(), ThreadPoolExecutor(max_workers=4) as pool:
        killer = threading.Timer(rng.uniform(0.05, 0.8), replica.process.kill)
        killer.start()
        placed = list(pool.map(lambda p: cycle(replica, p, faults.nodes), pods))
        killer.join()
        replica.process.start()

        assert_capacity(faults.api)
        assert_ledgers_agree(faults.api, faults.scrapes(replica))
        # kube-scheduler tries the pods again that were not bound
        retried = [p for p, ok in zip(pods, placed, strict=True) if not ok]
        list(pool.map(lambda p: cycle(replica, p, faults.nodes), retried))
    assert_capacity(faults.api)
    fresh = faults.replica("fresh")
    assert_ledgers_agree(faults.api, faults.scrapes(replica, fresh))
