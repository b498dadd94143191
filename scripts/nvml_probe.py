#!/usr/bin/env python3
"""What vgpu's NVML adapter sees on this machine, as one JSON document on stdout.

Run it on a GPU node (or in the device-plugin container) to check discovery before deploying:

    .venv/bin/python scripts/nvml_probe.py --wait 5

It prints each GPU NVML reports (uuid, index, name, memory MiB, NUMA node, MIG mode), the
`hami.io/node-nvidia-register` annotation the device plugin would write for them, the links
between the GPUs as a matrix in `nvidia-smi topo -m` words with HAMi's pair score in each cell
(and the `hami.io/node-nvidia-score` annotation), each GPU's MIG capability (supported, on,
pending, GPU instance profiles with placements), how long discovery took, and the health events
seen while it waited. A topology or MIG query that fails is reported in the document
(`topology_error`, `mig_error`) without failing the probe. Logs go to stderr. Exit status: 0
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
from vgpu.domain.inventory import GpuInfo, HealthEvent, SharingConfig, register_device
from vgpu.domain.topology import (
    SCORE_ANNOTATION,
    GpuLink,
    PcieLink,
    encode_pair_scores,
    pair_scores,
)
from vgpu.ports.gpu import GpuUnavailable

NO_GPU = 2
# nvidia-smi topo -m's words for each PCIe level
_PCIE_WORDS = {
    PcieLink.SAME_BOARD: "INT",
    PcieLink.SINGLE_SWITCH: "PIX",
    PcieLink.MULTI_SWITCH: "PXB",
    PcieLink.HOST_BRIDGE: "PHB",
    PcieLink.SAME_CPU: "NODE",
    PcieLink.CROSS_CPU: "SYS",
}


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
        topology = _topology(adapter, gpus)
        mig = _mig(adapter)
        events = _watch(adapter, args.wait)
    finally:
        adapter.close()
    unhealthy = {e.uuid for e in events if not e.healthy}
    devices = [register_device(g, sharing, healthy=g.uuid not in unhealthy) for g in gpus]
    report = {
        "gpus": [asdict(g) for g in gpus],
        "discover_ms": round(discover_ms, 1),
        "register_annotation": {NVIDIA.register_annotation: encode_node_devices(devices)},
        **topology,
        **mig,
        "health_events": [asdict(e) for e in events],
        "waited_s": args.wait,
    }
    print(json.dumps(report, indent=2))
    return 0


def _topology(adapter: NvmlGpus, gpus: list[GpuInfo]) -> dict[str, object]:
    try:
        links = adapter.read_topology()
    except GpuUnavailable as err:
        return {"topology_error": str(err)}
    scores = pair_scores(links)
    return {
        "topology_matrix": _matrix(gpus, links),
        "score_annotation": {SCORE_ANNOTATION: encode_pair_scores(scores.scores)},
        "asymmetric_pairs": [list(pair) for pair in scores.asymmetric],
    }


def _matrix(gpus: list[GpuInfo], links: list[GpuLink]) -> list[str]:
    """Rows like nvidia-smi's: `PIX+NV4 450` = one PCIe switch, 4 NVLinks, score 450."""
    by_pair = {(link.source, link.target): link for link in links}
    names = [f"GPU{g.index}" for g in gpus]
    cells = [
        ["X" if a.uuid == b.uuid else _cell(by_pair.get((a.uuid, b.uuid))) for b in gpus]
        for a in gpus
    ]
    width = max(len(c) for row in cells for c in row + names) + 2
    header = " " * width + "".join(n.ljust(width) for n in names)
    rows = [
        name.ljust(width) + "".join(c.ljust(width) for c in row)
        for name, row in zip(names, cells, strict=True)
    ]
    return [line.rstrip() for line in [header, *rows]]


def _cell(link: GpuLink | None) -> str:
    if link is None:
        return "?"
    nvlinks = f"+NV{link.nvlinks}" if link.nvlinks else ""
    return f"{_PCIE_WORDS[link.pcie]}{nvlinks} {link.score}"


def _mig(adapter: NvmlGpus) -> dict[str, object]:
    try:
        return {"mig": {uuid: asdict(c) for uuid, c in adapter.mig_capabilities().items()}}
    except GpuUnavailable as err:
        return {"mig_error": str(err)}


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
