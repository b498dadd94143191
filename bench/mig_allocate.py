"""Allocate latency of the device plugin for a container with one MIG device, and the cost of
one release cycle, with the fake MIG GPU port.

Each Allocate first runs a release cycle (list the node's pods from the watch cache, decode
every `hami.io/vgpu-mig-allocations`), then verifies the grant, makes the instance and writes
the runtime identity; here the previous pod's instance is destroyed on the way, as when pods
come and go. The pods come from an in-memory cluster and the GPU is the fake, so this is the
plugin's own CPU cost; NVML's create/destroy (tens to hundreds of ms on real GPUs) and the API
write come on top.

    .venv/bin/python bench/mig_allocate.py          # 0, 30 and 110 MIG pods already on the node
"""

import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.device_plugin.migworld import MIG_A, MIG_B, mig_pod, mig_world, reserve

CALLS = 300
SMALL = "NVIDIA,4864,15:"


def measure(running: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        w = mig_world(Path(tmp))
        for i in range(running):  # on the other GPU, reservations only: what each cycle reads
            reservation = reserve(0, 0, MIG_B, "1g.5gb", i % 7, 1)
            pod = mig_pod(f"{MIG_B},{SMALL};", [reservation], name=f"r{i}")
            w.cluster.put_pod(replace(pod, phase="Running"))
        allocate, release = [], []
        for i in range(CALLS):
            w.put(
                mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)], name=f"n{i}")
            )
            start = time.perf_counter()
            w.allocator.allocate([[f"{MIG_A}-0"]])
            allocate.append(time.perf_counter() - start)
            w.cluster.delete_pod("default", f"n{i}")
            start = time.perf_counter()
            w.mig.reconcile()
            release.append(time.perf_counter() - start)
        return allocate, release


def summary(took: list[float]) -> str:
    took = sorted(took)
    median = statistics.median(took) * 1000
    p99 = took[int(len(took) * 0.99) - 1] * 1000
    return f"{median:>9.3f}   {p99:>6.3f}"


def main() -> None:
    print(f"MIG Allocate and release cycle (fake GPU port), {CALLS} each")
    print("pods on node   Allocate median ms   p99 ms   release median ms   p99 ms")
    for running in (0, 30, 110):
        allocate, release = measure(running)
        print(f"{running:>12}   {summary(allocate):>22}   {summary(release):>23}")


if __name__ == "__main__":
    main()
