"""What one `/metrics` scrape and one feedback tick of `vgpu monitor` cost, by container count.

For each count it writes that many container directories with a layout-1 region (two GPUs,
`--procs` live processes each, as HAMi-core would), then times, on the real mmap adapter:
a scrape (list the directories, read every region, render the Prometheus text) and a tick
(list, clean-up check, read, priority feedback writes). Prints median and p99 in ms and the
size of the scrape body.

    .venv/bin/python bench/monitor_scrape.py            # 10, 50, 200 containers
    .venv/bin/python bench/monitor_scrape.py --quick    # 10 containers
"""

import argparse
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from vgpu.adapters.hamicore import HamiCoreRegions
from vgpu.app.monitor.daemon import MonitorDaemon
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.domain.pod import Container, Pod
from vgpu.ports.gpu import GpuUsage

NODE = "bench-node"
V1_SIZE = 2_008_952
UUIDS = ["GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"]


def region_bytes(procs: int) -> bytes:
    """A layout-1 region (docs/protocol.md#shared-region) with `procs` live processes on two
    GPUs."""
    buf = bytearray(V1_SIZE + 1)
    struct.pack_into("<iII", buf, 0, 19920718, 1, 2)
    struct.pack_into("<Q", buf, 56, 2)
    for i, uuid in enumerate(UUIDS):
        buf[64 + 96 * i : 64 + 96 * i + len(uuid)] = uuid.encode()
        struct.pack_into("<Q", buf, 1600 + 8 * i, 4 << 30)
    for k in range(procs):
        slot = 1856 + 1960 * k
        struct.pack_into("<ii", buf, slot, 100 + k, 9000 + k)
        for d in range(2):
            struct.pack_into("<5Q", buf, slot + 8 + 64 * d, 1 << 20, 1 << 20, 1 << 28, 0, 3 << 27)
            struct.pack_into("<Q", buf, slot + 1160 + 48 * d + 16, 10)
        struct.pack_into("<i", buf, slot + 1928, 1)
    struct.pack_into("<4i", buf, 2_008_896, procs, 1, 2, 1)
    struct.pack_into("<Q", buf, 2_008_912, int(time.time()))
    return bytes(buf)


class _Cards:
    def read_usage(self) -> list[GpuUsage]:
        return [
            GpuUsage(u, i, "NVIDIA H100 80GB HBM3", 1 << 30, 50, 20) for i, u in enumerate(UUIDS)
        ]

    def close(self) -> None:
        pass


def timed(action: Callable[[], object], rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def measure(count: int, procs: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="vgpu-monitor-bench-") as temp:
        root = Path(temp)
        data = region_bytes(procs)
        pods = []
        for n in range(count):
            uid = f"00000000-0000-0000-0000-{n:012d}"
            folder = root / f"{uid}_main"
            folder.mkdir()
            (folder / "libvgpu.so").write_bytes(b"")
            (folder / "a.cache").write_bytes(data)
            pods.append(
                Pod(
                    "bench",
                    f"pod-{n}",
                    uid=uid,
                    labels={"hami.io/vgpu-node": NODE},
                    containers=(Container("main"),),
                )
            )
        regions = HamiCoreRegions(root, writable=True)
        metrics = MonitorMetrics(MonitorSources(NODE, _Cards(), regions, lambda: pods))  # type: ignore[arg-type]
        daemon = MonitorDaemon(
            regions, lambda: pods, interval=5, cleanup_grace=300, priority_feedback=True
        )
        body = metrics.render()
        scrape = timed(metrics.render, rounds)
        tick = timed(daemon.tick, rounds)
        regions.close()
    print(
        f"{count:>5} containers x {procs} procs: scrape median {scrape[0]:7.2f} ms "
        f"p99 {scrape[1]:7.2f} ms ({len(body) / 1024:.0f} KiB); "
        f"tick median {tick[0]:7.2f} ms p99 {tick[1]:7.2f} ms"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 containers, few rounds")
    parser.add_argument("--procs", type=int, default=4, help="live processes per container")
    args = parser.parse_args(argv)
    counts, rounds = ([10], 10) if args.quick else ([10, 50, 200], 30)
    print(f"python {sys.version.split()[0]}; rounds per figure: {rounds}")
    for count in counts:
        measure(count, args.procs, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
