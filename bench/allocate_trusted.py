"""Allocate latency of the device plugin with grant verification, its node ledger and its record.

Each Allocate verifies the grants of every waiting pod, counts what the pods on the node hold
(served pods from the served record, decoded once; waiting pods from their verified grants) and
serves one pod, saving its grant in the served record first. The pods already on the node were
served the same way, as on a real node. The pods come from an in-memory cluster, as they come
from the plugin's watch cache in production, so this is the CPU cost the checks add; the API
writes of a real Allocate (one pod patch, one node patch) come on top.

Two tables: the served record in memory (the checks alone), then in a file on disk as in
production (`<state_dir>/served.json`, written and fsynced before each answer).

    .venv/bin/python bench/allocate_trusted.py          # 0, 30 and 110 pods already on the node
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.device_plugin.builders import UUID_A, UUID_B, scheduled_pod, world
from vgpu.adapters.hostfile import JsonServedRecord

CALLS = 300


def measure(running: int, on_disk: bool) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        record = JsonServedRecord(Path(tmp) / "state") if on_disk else None
        w = world(Path(tmp), split_count=1000, record=record)
        for i in range(running):
            uuid = (UUID_A, UUID_B)[i % 2]
            w.put(scheduled_pod(f"{uuid},NVIDIA,10,0:;", name=f"run-{i}"))
            w.allocator.allocate([[f"{uuid}-0"]])
        took = []
        for i in range(CALLS):
            w.put(scheduled_pod(f"{UUID_A},NVIDIA,1,0:;", name=f"new-{i}"))
            start = time.perf_counter()
            w.allocator.allocate([[f"{UUID_A}-0"]])
            took.append(time.perf_counter() - start)
            # served pods leave, the node stays the same (the keeper drops them from the record)
            w.cluster.delete_pod("default", f"new-{i}")
            w.served.prune({p.uid for p in w.cluster.list_pods()}, w.served.mark())
        return took


def main() -> None:
    for on_disk in (False, True):
        where = "on disk (write + fsync + rename)" if on_disk else "in memory"
        print(f"Allocate with verification, node ledger and served record {where}, {CALLS} calls")
        print("pods on node   median ms   p99 ms")
        for running in (0, 30, 110):
            took = sorted(measure(running, on_disk))
            median = statistics.median(took) * 1000
            p99 = took[int(len(took) * 0.99) - 1] * 1000
            print(f"{running:>12}   {median:>9.3f}   {p99:>6.3f}")


if __name__ == "__main__":
    main()
