#!/usr/bin/env python3
"""Does `vgpu monitor` track a real CUDA workload under HAMi-core? Run it on a GPU machine.

    .venv/bin/python scripts/monitor_probe.py --libvgpu /usr/local/vgpu/libvgpu.so

It makes a container directory in a temp dir, starts a small CUDA workload (the driver API
through ctypes: a context, a `--mib` allocation, a spinning kernel launched for `--seconds`)
with libvgpu.so preloaded and HAMi-core's environment pointing at that directory, and
meanwhile reads the region and renders the monitor's metrics every half second, exactly as
`vgpu monitor` would (same adapter, same collector). It then checks that the container's
used memory covered the allocation, that its limit is `--limit-mib`, that a last-kernel time
appeared, and that the host figures from NVML saw the memory.

Prints a JSON report, then one line `monitor_probe: PASS|FAIL|SKIP ...`. Exit status: 0 when
the figures track the workload, 1 when they do not, 2 when there is no usable GPU, no
HAMi-core library or no CUDA driver library here.
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from vgpu.adapters.hamicore import HamiCoreRegions
from vgpu.adapters.nvml import NvmlGpus
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.domain.pod import Container, Pod
from vgpu.ports.accounting import RegionUnavailable
from vgpu.ports.gpu import GpuUnavailable

PASS, FAIL, SKIP = 0, 1, 2
MIB = 1 << 20
NODE = "probe-node"
DEFAULT_LIBVGPU = "/usr/local/vgpu/libvgpu.so"

# A kernel that counts to its argument: enough to keep an SM busy and to be a launch.
SPIN_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 n)
{
  .reg .u64 %rd<3>;
  .reg .pred %p;
  ld.param.u64 %rd1, [n];
  mov.u64 %rd2, 0;
LOOP:
  add.u64 %rd2, %rd2, 1;
  setp.lt.u64 %p, %rd2, %rd1;
  @%p bra LOOP;
  ret;
}
\0"""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workload:
        return _workload(args.mib, args.seconds)
    gpus = NvmlGpus()
    try:
        try:
            baseline = gpus.read_usage()
        except GpuUnavailable as err:
            return _verdict(SKIP, f"no usable GPU: {err}")
        if not baseline:
            return _verdict(SKIP, "NVML lists no GPU")
        if not Path(args.libvgpu).is_file():
            return _verdict(
                SKIP,
                f"no HAMi-core library at {args.libvgpu} (pass --libvgpu PATH or set VGPU_LIBVGPU)",
            )
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError as err:
            return _verdict(SKIP, f"no CUDA driver library libcuda.so.1 ({err})")
        return _probe(args, gpus, baseline[0].memory_used_bytes or 0)
    finally:
        gpus.close()


def _probe(args: argparse.Namespace, gpus: NvmlGpus, host_before: int) -> int:
    with tempfile.TemporaryDirectory(prefix="vgpu-monitor-probe-") as temp:
        root = Path(temp)
        pod_uid = str(uuid.uuid4())
        directory = root / f"{pod_uid}_main"
        directory.mkdir(mode=0o777)
        env = {
            **os.environ,
            "LD_PRELOAD": args.libvgpu,
            "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(directory / f"{uuid.uuid4()}.cache"),
            "CUDA_DEVICE_MEMORY_LIMIT_0": f"{args.limit_mib}m",
            "CUDA_DEVICE_SM_LIMIT": str(args.sm_limit),
            "CUDA_VISIBLE_DEVICES": "0",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # CUDA device 0 = NVML index 0
        }
        workload = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--workload",
                "--mib",
                str(args.mib),
                "--seconds",
                str(args.seconds),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        regions = HamiCoreRegions(root)
        pod = Pod(
            "probe",
            "probe",
            uid=pod_uid,
            labels={"hami.io/vgpu-node": NODE},
            containers=(Container("main"),),
        )
        metrics = MonitorMetrics(MonitorSources(NODE, gpus, regions, lambda: [pod]))
        samples = []
        while workload.poll() is None:
            samples.append(_sample(regions, metrics))
            time.sleep(0.5)
        samples.append(_sample(regions, metrics))
        out, err = workload.communicate()
        regions.close()
    report = {
        "workload_exit": workload.returncode,
        "workload_stdout": out.strip(),
        "workload_stderr": err.strip()[-2000:],
        "host_memory_before_bytes": host_before,
        "samples": samples,
    }
    print(json.dumps(report, indent=2))
    problems = judge(samples, workload.returncode, host_before, args.mib, args.limit_mib)
    if problems:
        return _verdict(FAIL, "; ".join(problems))
    return _verdict(PASS, f"the monitor tracked a {args.mib} MiB workload under HAMi-core")


def _sample(regions: HamiCoreRegions, metrics: MonitorMetrics) -> dict[str, Any]:
    found: dict[str, Any] = {"t": round(time.time(), 2)}
    entries = regions.list_dirs()
    try:
        region = regions.read(entries[0]) if entries else None
        found["region"] = (
            None
            if region is None
            else f"layout {region.layout}, "
            f"version {region.major}.{region.minor}, {len(region.processes)} process(es)"
        )
    except RegionUnavailable as err:
        found["region"] = None
        found["region_problem"] = str(err)
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if (
                sample.labels.get("vdevice_index", "0") == "0"
                and sample.labels.get("device_index", "0") == "0"
            ):
                found[sample.name] = sample.value
    return found


def judge(
    samples: Sequence[dict[str, Any]], exit_code: int, host_before: int, mib: int, limit_mib: int
) -> list[str]:
    """What did not track the workload; empty when everything did."""
    problems = []
    if exit_code != 0:
        problems.append(f"the workload failed (exit {exit_code})")
    if not any(s.get("region") for s in samples):
        problems.append("HAMi-core never wrote a readable region")
    used = max((s.get("hami_vgpu_memory_used_bytes", 0) for s in samples), default=0)
    if used < mib * MIB:
        problems.append(
            f"container memory peaked at {used / MIB:.0f} MiB, below the {mib} MiB allocated"
        )
    limits = {
        s["hami_vgpu_memory_limit_bytes"] for s in samples if "hami_vgpu_memory_limit_bytes" in s
    }
    if limits != {limit_mib * MIB}:
        problems.append(f"container limit read as {sorted(limits)} bytes, not {limit_mib} MiB")
    if not any("hami_container_last_kernel_elapsed_seconds" in s for s in samples):
        problems.append("no last-kernel time appeared")
    host = max((s.get("hami_host_gpu_memory_used_bytes", 0) for s in samples), default=0)
    if host - host_before < mib * MIB:
        problems.append(f"host memory rose by only {(host - host_before) / MIB:.0f} MiB")
    return problems


def _workload(mib: int, seconds: float) -> int:
    """Allocate `mib` MiB and launch a spinning kernel for `seconds` (CUDA driver API)."""
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(result: int, what: str) -> None:
        if result != 0:
            raise RuntimeError(f"{what} failed with CUresult {result}")

    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    pointer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(mib * MIB)), "cuMemAlloc")
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), SPIN_PTX), "cuModuleLoadData")
    function = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(function), module, b"spin"), "cuModuleGetFunction")
    count = ctypes.c_uint64(20_000_000)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(count), ctypes.c_void_p))
    launches = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check(
            cuda.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, None, params, None),
            "cuLaunchKernel",
        )
        check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        launches += 1
    check(cuda.cuMemFree_v2(pointer), "cuMemFree")
    check(cuda.cuCtxDestroy_v2(context), "cuCtxDestroy")
    print(f"{launches} launches, {mib} MiB held for {seconds} s")
    return 0


def _verdict(code: int, message: str) -> int:
    word = {PASS: "PASS", FAIL: "FAIL", SKIP: "SKIP"}[code]
    print(f"monitor_probe: {word} {message}", flush=True)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--libvgpu",
        default=os.environ.get("VGPU_LIBVGPU", DEFAULT_LIBVGPU),
        help=f"HAMi-core's library (default $VGPU_LIBVGPU or {DEFAULT_LIBVGPU})",
    )
    parser.add_argument("--mib", type=int, default=256, help="memory to allocate (default 256)")
    parser.add_argument("--limit-mib", type=int, default=1024, help="HAMi-core memory limit")
    parser.add_argument("--sm-limit", type=int, default=50, help="HAMi-core SM limit, percent")
    parser.add_argument("--seconds", type=float, default=8.0, help="how long the workload runs")
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    sys.exit(main())
