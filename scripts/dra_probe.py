#!/usr/bin/env python3
"""Does a claim prepared by `vgpu dra-driver` hold a CUDA workload to its memory limit? Run it
on a GPU machine.

    .venv/bin/python scripts/dra_probe.py --libvgpu /usr/local/vgpu/libvgpu.so

It builds the DRA driver as `vgpu dra-driver` does (the unit tests' node, on the real GPUs
through NVML), with the API in memory and its directories in a temp dir; a fake kubelet
registers it over the real unix sockets. The domain's allocator, acting as kube-scheduler,
allocates a claim of `--limit-mib` MiB and `--sm-limit` % of GPU 0 from the slice the driver
published; the kubelet prepares it. The claim's CDI edits are then applied by hand, as a
container runtime would: the spec's and the device's environment, HAMi-core preloaded
(`LD_PRELOAD`, standing for the `ld.so.preload` mount), and the GPU made visible with
`CUDA_VISIBLE_DEVICES=<uuid>` (standing for NVIDIA's runtime). A small CUDA workload (the
driver API through ctypes) then allocates 64 MiB at a time until CUDA refuses, up to
`--limit-mib + 1024`. Finally the claim is unprepared.

The limit held when CUDA reported the claim's memory as the GPU's total, and refused an
allocation before the workload held more than the limit. Prints a JSON report, then one line
`dra_probe: PASS|FAIL|SKIP ...`. Exit status: 0 when the limit held, 1 when it did not, 2
when there is no usable GPU, no HAMi-core library or no CUDA driver library here.
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.dra.kubelet import FakeDraKubelet
from tests.unit.dra_driver.node import make_node
from vgpu.adapters.fake.dra import FakeDraApi
from vgpu.adapters.nvml import NvmlGpus
from vgpu.domain.dra import (
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaim,
    allocation_json,
    parse_resource_slice,
    resource_claim_json,
)
from vgpu.domain.dra.allocator import allocate
from vgpu.domain.dra.outcome import Allocation
from vgpu.ports.gpu import GpuUnavailable

PASS, FAIL, SKIP = 0, 1, 2
MIB = 1 << 20
STEP_MIB = 64
NODE = "gpu-node-1"
DRIVER = "gpu.vgpu.io"
DEFAULT_LIBVGPU = "/usr/local/vgpu/libvgpu.so"
CUDA_ERROR_OUT_OF_MEMORY = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workload:
        return _workload(args.try_mib)
    gpus = NvmlGpus()
    try:
        gpus.discover()
    except GpuUnavailable as err:
        return _verdict(SKIP, f"no usable GPU: {err}")
    finally:
        gpus.close()
    if not Path(args.libvgpu).is_file():
        return _verdict(
            SKIP,
            f"no HAMi-core library at {args.libvgpu} (pass --libvgpu PATH or set VGPU_LIBVGPU)",
        )
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        return _verdict(SKIP, f"no CUDA driver library libcuda.so.1 ({err})")
    with tempfile.TemporaryDirectory(prefix="vgpu-dra-", dir="/tmp") as temp:
        return _probe(args, Path(temp))


def _probe(args: argparse.Namespace, root: Path) -> int:
    (root / "registry").mkdir()
    node = make_node(root, NvmlGpus(), gpu_visibility="env")
    container, api = node.container, node.api
    kubelet = FakeDraKubelet(root / "registry")
    plugin = container.kubelet()
    report: dict[str, Any] = {}
    try:
        container.publisher().publish()
        [published] = api.list_slices(DRIVER, node.container.gpus().node)
        report["slice_devices"] = [d["name"] for d in published["spec"]["devices"]]
        plugin.serve(container.service())
        report["registered"] = kubelet.discover().name
        claim = _allocated_claim(api, published, args.limit_mib, args.sm_limit)
        meta = claim["metadata"]
        ref = (meta["namespace"], meta["name"], meta["uid"])
        answer = kubelet.prepare(ref)[meta["uid"]]
        report["prepare"] = {"error": answer.error, "cdi_ids": answer.cdi_ids}
        if answer.error:
            print(json.dumps(report, indent=2))
            return _verdict(FAIL, f"the driver refused the claim: {answer.error}")
        spec = container.cdi_specs().read(meta["uid"]) or {}
        env = {**os.environ, **container_env(spec, answer.cdi_ids), "LD_PRELOAD": args.libvgpu}
        report["applied_env"] = {k: v for k, v in env.items() if k.startswith(("CUDA_", "NVIDIA"))}
        workload = subprocess.run(
            [sys.executable, __file__, "--workload", "--try-mib", str(args.limit_mib + 1024)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        report["workload_exit"] = workload.returncode
        report["workload_stderr"] = workload.stderr.strip()[-2000:]
        result = json.loads(workload.stdout.strip().splitlines()[-1]) if workload.stdout else {}
        report["workload"] = result
        report["unprepare"] = kubelet.unprepare(ref)
        report["spec_left"] = container.cdi_specs().read(meta["uid"]) is not None
    finally:
        kubelet.close()
        plugin.stop()
    print(json.dumps(report, indent=2))
    problems = judge(result, workload.returncode, args.limit_mib, report)
    if problems:
        return _verdict(FAIL, "; ".join(problems))
    return _verdict(PASS, f"a {args.limit_mib} MiB claim held the workload to {args.limit_mib} MiB")


def _allocated_claim(
    api: FakeDraApi, published: dict[str, Any], limit_mib: int, sm_limit: int
) -> dict[str, Any]:
    """Allocate a claim on GPU 0 of the `published` slice's node as kube-scheduler would, and
    store it in the fake API."""
    gpu_class = DeviceClass("gpu.vgpu.io", (f'device.driver == "{DRIVER}"',))
    request = ExactDeviceRequest(
        "gpu.vgpu.io",
        selectors=('device.attributes["gpu.vgpu.io"].index == 0',),
        capacity={"memory": limit_mib * MIB, "cores": sm_limit},
    )
    claim = ResourceClaim("probe", "default", "probe-claim-uid",
                          requests=(DeviceRequest("gpu", request),))
    slice_ = parse_resource_slice(published)
    outcome = allocate([claim], slice_.node_name or NODE, [slice_], [gpu_class])
    if not isinstance(outcome, Allocation):
        raise RuntimeError(f"the allocator could not place the probe's claim: {outcome}")
    manifest = resource_claim_json(claim)
    manifest["status"] = {
        "allocation": allocation_json(outcome.results[0]),
        "reservedFor": [{"resource": "pods", "name": "probe", "uid": "probe-pod-uid"}],
    }
    api.put_claim(manifest)
    return manifest


def container_env(spec: Mapping[str, Any], cdi_ids: Sequence[str]) -> dict[str, str]:
    """The environment a container gets from the claim's CDI devices `cdi_ids` (ours, of the
    form `<kind>=<name>`): the spec's edits, then each device's, a later value replacing an
    earlier one, as the CDI tools apply them; `NVIDIA_VISIBLE_DEVICES` also as
    `CUDA_VISIBLE_DEVICES`, as the NVIDIA runtime would expose only those GPUs."""
    kind = spec.get("kind", "")
    names = {i.partition("=")[2] for i in cdi_ids if i.partition("=")[0] == kind}
    env: dict[str, str] = {}
    edits = [spec.get("containerEdits") or {}] + [
        d.get("containerEdits") or {} for d in spec.get("devices", []) if d.get("name") in names
    ]
    for edit in edits:
        for entry in edit.get("env", []):
            key, _, value = entry.partition("=")
            env[key] = value
    if "NVIDIA_VISIBLE_DEVICES" in env:
        env["CUDA_VISIBLE_DEVICES"] = env["NVIDIA_VISIBLE_DEVICES"]
    return env


def judge(
    result: Mapping[str, Any], exit_code: int, limit_mib: int, report: Mapping[str, Any]
) -> list[str]:
    """What shows the limit did not hold; empty when it did."""
    problems = []
    if exit_code != 0 or not result:
        return [f"the workload failed (exit {exit_code})"]
    total = result.get("total_mib")
    if total != limit_mib:
        problems.append(f"CUDA reported {total} MiB in total, not the claim's {limit_mib} MiB")
    held = int(result.get("held_mib", 0))
    if held > limit_mib:
        problems.append(f"the workload held {held} MiB, past the claim's {limit_mib} MiB")
    if held < limit_mib // 2:
        problems.append(f"the workload held only {held} MiB: HAMi-core refused too early")
    if result.get("stopped_by") != CUDA_ERROR_OUT_OF_MEMORY:
        problems.append(
            f"allocation stopped with CUresult {result.get('stopped_by')}, not out-of-memory"
        )
    if report.get("spec_left"):
        problems.append("the claim's CDI spec is still there after Unprepare")
    return problems


def _workload(try_mib: int) -> int:
    """Allocate STEP_MIB at a time until CUDA refuses or `try_mib` is held; print a JSON line."""
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(result: int, what: str) -> None:
        if result != 0:
            raise RuntimeError(f"{what} failed with CUresult {result}")

    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    pointers = []
    stopped_by = 0
    while len(pointers) * STEP_MIB < try_mib:
        pointer = ctypes.c_uint64()
        result = cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(STEP_MIB * MIB))
        if result != 0:
            stopped_by = result
            break
        pointers.append(pointer)
    for pointer in pointers:
        cuda.cuMemFree_v2(pointer)
    check(cuda.cuCtxDestroy_v2(context), "cuCtxDestroy")
    print(json.dumps({
        "total_mib": total.value // MIB,
        "free_mib_at_start": free.value // MIB,
        "held_mib": len(pointers) * STEP_MIB,
        "stopped_by": stopped_by,
    }))
    return 0


def _verdict(code: int, message: str) -> int:
    word = {PASS: "PASS", FAIL: "FAIL", SKIP: "SKIP"}[code]
    print(f"dra_probe: {word} {message}", flush=True)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--libvgpu",
        default=os.environ.get("VGPU_LIBVGPU", DEFAULT_LIBVGPU),
        help=f"HAMi-core's library (default $VGPU_LIBVGPU or {DEFAULT_LIBVGPU})",
    )
    parser.add_argument("--limit-mib", type=int, default=1024, help="the claim's memory (MiB)")
    parser.add_argument("--sm-limit", type=int, default=50, help="the claim's cores, percent")
    parser.add_argument("--try-mib", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    sys.exit(main())
