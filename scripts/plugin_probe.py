#!/usr/bin/env python3
"""Does `vgpu device-plugin` on real NVML serve a slice that HAMi-core holds? Run it on a GPU
machine.

    .venv/bin/python scripts/plugin_probe.py --libvgpu /usr/local/vgpu/libvgpu.so

It runs the real `vgpu device-plugin` process on this machine's GPUs (NVML), with the cluster
in memory (`--fake-cluster`: one node and one pod the scheduler has bound there with a grant of
`--limit-mib` MiB and `--sm-limit` % of GPU 0) and its directories in a temp dir. A fake
kubelet in the plugin directory takes the registration, reads the device list, and allocates
the pod's device. The answer is applied by hand, as a container runtime would: its
environment, with each path under a mount's container path moved to the mount's host path,
HAMi-core preloaded (`LD_PRELOAD`, standing for the `ld.so.preload` mount) and the GPU made
visible with `CUDA_VISIBLE_DEVICES=<uuid>` (standing for NVIDIA's runtime). The CUDA workload
of `dra_probe.py` then allocates 64 MiB at a time until CUDA refuses. The plugin's `/healthz`
and `/readyz` are read on the way.

Prints a JSON report, then one line `plugin_probe: PASS|FAIL|SKIP ...`. Exit status: 0 when
the plugin registered every GPU and the limit held, 1 when not, 2 when there is no usable GPU,
no HAMi-core library or no CUDA driver library here.
"""

import argparse
import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.dra_probe import DEFAULT_LIBVGPU, FAIL, PASS, SKIP, judge
from tests.e2e.device_plugin.kubelet import FakeKubelet
from tests.e2e.scheduler.harness import wait_until
from vgpu.adapters.nvml import NvmlGpus
from vgpu.domain.inventory import GpuInfo
from vgpu.ports.gpu import GpuUnavailable

NODE = "gpu-probe-node"
SPLIT = 4


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    gpus = NvmlGpus()
    try:
        found = gpus.discover()
    except GpuUnavailable as err:
        return _verdict(SKIP, f"no usable GPU: {err}")
    finally:
        gpus.close()
    if not found:
        return _verdict(SKIP, "NVML lists no GPU")
    if not Path(args.libvgpu).is_file():
        return _verdict(SKIP, f"no HAMi-core library at {args.libvgpu} (pass --libvgpu PATH)")
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        return _verdict(SKIP, f"no CUDA driver library libcuda.so.1 ({err})")
    with tempfile.TemporaryDirectory(prefix="vgpu-dp-", dir="/tmp") as temp:
        return _probe(args, Path(temp), found)


def _probe(args: argparse.Namespace, root: Path, gpus: Sequence[GpuInfo]) -> int:
    grant = f"{gpus[0].uuid},NVIDIA,{args.limit_mib},{args.sm_limit}:;"
    plugin_dir, hook = root / "plugins", root / "hook"
    plugin_dir.mkdir()
    (hook / "vgpu").mkdir(parents=True)
    (hook / "vgpu" / "libvgpu.so").symlink_to(Path(args.libvgpu).resolve())
    health_port = _free_port()
    log_file = root / "plugin.log"
    command = [
        sys.executable, "-m", "vgpu.app.cli", "device-plugin", "--node-name", NODE,
        "--fake-cluster", str(_cluster_file(root / "cluster.yaml", grant)),
        "--plugin-dir", str(plugin_dir), "--hook-path", str(hook),
        "--state-dir", str(root / "state"), "--split-count", str(SPLIT),
        "--health-listen", f"127.0.0.1:{health_port}",
    ]  # fmt: skip
    env = {**os.environ, "VGPU_KUBELET_POLL": "0.05", "VGPU_LOCK_DIR": str(root / "vgpulock")}
    kubelet = FakeKubelet(plugin_dir).start()
    report: dict[str, Any] = {"gpus": [g.uuid for g in gpus]}
    started = time.monotonic()
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        if not wait_until(lambda: bool(kubelet.registrations and kubelet.device_lists), 60):
            report["log"] = log_file.read_text()[-4000:]
            print(json.dumps(report, indent=2))
            return _verdict(FAIL, "the plugin did not register with the kubelet in 60 s")
        report["registered_after_s"] = round(time.monotonic() - started, 2)
        report["resource"] = kubelet.registrations[-1].resource_name
        devices = kubelet.device_lists[-1]
        report["devices"] = len(devices)
        report["unhealthy"] = [d for d, health in devices if health != "Healthy"]
        report["numa"] = kubelet.numa_lists[-1] if kubelet.numa_lists else {}
        report["healthz"] = _http(health_port, "/healthz")
        report["readyz"] = _http(health_port, "/readyz")
        kubelet.admit("uid-probe", ["main"])
        (served,) = kubelet.allocate([f"{gpus[0].uuid}-0"]).container_responses
        mounts = {m.container_path: m.host_path for m in served.mounts}
        applied = _applied_env(dict(served.envs), mounts)
        report["served_env"] = {k: v for k, v in served.envs.items() if k.startswith("CUDA_")}
        report["mounts"] = mounts
        workload = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("dra_probe.py")), "--workload",
             "--try-mib", str(args.limit_mib + 1024)],
            env={**os.environ, **applied, "LD_PRELOAD": args.libvgpu},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        report["workload_exit"] = workload.returncode
        report["workload_stderr"] = workload.stderr.strip()[-2000:]
        result = json.loads(workload.stdout.strip().splitlines()[-1]) if workload.stdout else {}
        report["workload"] = result
    finally:
        process.terminate()
        report["plugin_exit"] = process.wait(timeout=30)
        kubelet.stop()
    print(json.dumps(report, indent=2))
    problems = judge(result, workload.returncode, args.limit_mib, {})
    if report["devices"] != SPLIT * len(gpus):
        problems.append(f"{report['devices']} devices listed, not {SPLIT} x {len(gpus)} GPUs")
    if report["unhealthy"]:
        problems.append(f"devices listed unhealthy: {report['unhealthy']}")
    if report["healthz"] != 200 or report["readyz"] != 200:
        problems.append(f"/healthz {report['healthz']}, /readyz {report['readyz']}")
    if problems:
        return _verdict(FAIL, "; ".join(problems))
    return _verdict(PASS, f"a {args.limit_mib} MiB grant held the workload to {args.limit_mib} MiB")


def _cluster_file(path: Path, grant: str) -> Path:
    """The node and a pod bound to it with `grant` (unsigned: `--fake-cluster` is trusted)."""
    bound = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-time": "1700000000",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "hami.io/vgpu-devices-to-allocate": grant,
        "hami.io/vgpu-devices-allocated": grant,
    }
    pod = {
        "metadata": {"name": "probe", "namespace": "default", "uid": "uid-probe",
                     "annotations": bound},
        "spec": {"schedulerName": "vgpu-scheduler", "nodeName": NODE,
                 "containers": [{"name": "main",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip
    lock = {"hami.io/mutex.lock": "2026-01-01T00:00:00Z,default,probe"}  # the scheduler's
    node = {"name": NODE, "annotations": lock}
    path.write_text(yaml.safe_dump({"nodes": [node], "pods": [pod]}))
    return path


def _applied_env(envs: Mapping[str, str], mounts: Mapping[str, str]) -> dict[str, str]:
    """The container's environment as seen from the host: a value under a mount's container
    path names the host path instead; the served GPUs are the visible ones."""
    applied = {}
    for key, value in envs.items():
        for inside, outside in sorted(mounts.items(), key=lambda m: -len(m[0])):
            if value.startswith(inside):
                value = outside + value[len(inside) :]
                break
        applied[key] = value
    if "NVIDIA_VISIBLE_DEVICES" in applied:
        applied["CUDA_VISIBLE_DEVICES"] = applied["NVIDIA_VISIBLE_DEVICES"]
    return applied


def _http(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status)
    except OSError as err:
        return int(getattr(err, "code", 0))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _verdict(code: int, message: str) -> int:
    word = {PASS: "PASS", FAIL: "FAIL", SKIP: "SKIP"}[code]
    print(f"plugin_probe: {word} {message}", flush=True)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--libvgpu",
        default=os.environ.get("VGPU_LIBVGPU", DEFAULT_LIBVGPU),
        help=f"HAMi-core's library (default $VGPU_LIBVGPU or {DEFAULT_LIBVGPU})",
    )
    parser.add_argument("--limit-mib", type=int, default=1024, help="the grant's memory (MiB)")
    parser.add_argument("--sm-limit", type=int, default=50, help="the grant's cores, percent")
    return parser


if __name__ == "__main__":
    sys.exit(main())
