"""Allocate latency of the device plugin with grant verification and its node ledger.

Each Allocate verifies the grants of every waiting pod and, for the node ledger, of every pod
bound to the node (HMAC-SHA256 each), then serves one pod. The pods come from an in-memory
cluster, as they come from the plugin's watch cache in production, so this is the CPU cost
the checks add; the API writes of a real Allocate (one pod patch, one node patch) come on top.

    .venv/bin/python bench/allocate_trusted.py          # 0, 30 and 110 pods already on the node
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.device_plugin.builders import UUID_A, UUID_B, scheduled_pod, world

CALLS = 300


def measure(running: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        w = world(Path(tmp), split_count=1000)
        for i in range(running):
            grants = f"{(UUID_A, UUID_B)[i % 2]},NVIDIA,10,0:;"
            done = scheduled_pod(grants, name=f"run-{i}", **{"hami.io/bind-phase": "success"})
            w.put(done, lock=False)
        took = []
        for i in range(CALLS):
            w.put(scheduled_pod(f"{UUID_A},NVIDIA,1,0:;", name=f"new-{i}"))
            start = time.perf_counter()
            w.allocator.allocate([[f"{UUID_A}-0"]])
            took.append(time.perf_counter() - start)
            w.cluster.delete_pod(
                "default", f"new-{i}"
            )  # served pods leave, the node stays the same
        return took


def main() -> None:
    print(f"Allocate with verification and node ledger, {CALLS} calls each")
    print("pods on node   median ms   p99 ms")
    for running in (0, 30, 110):
        took = sorted(measure(running))
        median = statistics.median(took) * 1000
        p99 = took[int(len(took) * 0.99) - 1] * 1000
        print(f"{running:>12}   {median:>9.3f}   {p99:>6.3f}")


if __name__ == "__main__":
    main()
