#!/usr/bin/env python3
"""What vgpu's NVML adapter sees on this machine, as one JSON document on stdout.

Run it on a GPU node (or in the device-plugin container) to check discovery before deploying:

    .venv/bin/python scripts/nvml_probe.py --wait 5

It prints each GPU NVML reports (uuid, index, name, memory MiB, NUMA node, MIG mode), the
`hami.io/node-nvidia-register` annotation the device plugin would write for them, how long
discovery took, and the health events seen while it waited. Logs go to stderr. Exit status: 0
when GPUs were found, 2 when there is no usable GPU (no driver, no library, no GPU).
"""

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from vgpu.adapters.nvml import NvmlGpus
from vgpu.domain import NVIDIA, encode_node_devices
from vgpu.domain.inventory import HealthEvent, SharingConfig, register_device
from vgpu.ports.gpu import GpuUnavailable

NO_GPU = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        sharing = SharingConfig(args.split_count, args.memory_scaling, args.core_scaling)
    except ValueError as err:
        parser.error(str(err))
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    adapter = NvmlGpus(sysfs_root=args.sysfs_root)
    try:
        started = time.perf_counter()
        try:
            gpus = adapter.discover()
        except GpuUnavailable as err:
            print(f"nvml_probe: no usable GPU: {err}", file=sys.stderr)
            return NO_GPU
        discover_ms = (time.perf_counter() - started) * 1000
        events = _watch(adapter, args.wait)
    finally:
        adapter.close()
    unhealthy = {e.uuid for e in events if not e.healthy}
    devices = [register_device(g, sharing, healthy=g.uuid not in unhealthy) for g in gpus]
    report = {
        "gpus": [asdict(g) for g in gpus],
        "discover_ms": round(discover_ms, 1),
        "register_annotation": {NVIDIA.register_annotation: encode_node_devices(devices)},
        "health_events": [asdict(e) for e in events],
        "waited_s": args.wait,
    }
    print(json.dumps(report, indent=2))
    return 0


def _watch(adapter: NvmlGpus, seconds: float) -> list[HealthEvent]:
    events = adapter.wait_for_health_events(0)  # registration problems come first
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        events += adapter.wait_for_health_events(min(remaining, 1.0))
    return events


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wait",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long to watch for health events (XID errors) after discovery (default 5)",
    )
    parser.add_argument("--split-count", type=int, default=10, help="deviceSplitCount (10)")
    parser.add_argument(
        "--memory-scaling", type=float, default=1.0, help="deviceMemoryScaling (1.0)"
    )
    parser.add_argument("--core-scaling", type=float, default=1.0, help="deviceCoreScaling (1.0)")
    parser.add_argument(
        "--sysfs-root", type=Path, default=Path("/sys"), help="where NUMA nodes are read (/sys)"
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
