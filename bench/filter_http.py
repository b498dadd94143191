"""Filter latency over HTTP: a real `vgpu scheduler --fake-cluster` process, kube-scheduler's
JSON, clusters of a few sizes. Prints median, p99 and throughput; asserts nothing.

    .venv/bin/python bench/filter_http.py [--sizes 10,100,1000] [--requests 200] [--threads 8]

Every node has 8 cards (24000 MiB, split 10); each pod asks for 1 card with 1000 MiB and 5 %
cores, so no pod is ever refused; kube-scheduler sends every node name (nodeCacheCapable).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

CARDS = 8


def cluster_file(directory: Path, nodes: int) -> Path:
    body = {
        "nodes": [
            {
                "name": f"node-{n:04d}",
                "gpus": [
                    {"uuid": f"GPU-{n:04d}-{c}", "type": "NVIDIA L4", "memory": 24000}
                    for c in range(CARDS)
                ],
            }
            for n in range(nodes)
        ]
    }
    path = directory / f"cluster-{nodes}.yaml"
    path.write_text(json.dumps(body))  # JSON is YAML
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def pod(name: str) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 5}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "vgpu-scheduler",
            "containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}],
        },
        "status": {"phase": "Pending"},
    }


def start(path: Path, port: int, extender_port: int) -> subprocess.Popen[bytes]:
    """The scheduler with its webhook (and /readyz) on `port`, the verbs on `extender_port`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env["VGPU_LOG_LEVEL"] = "WARNING"
    command = [
        sys.executable,
        "-m",
        "vgpu.app.cli",
        "scheduler",
        "--fake-cluster",
        str(path),
        "--listen",
        f"127.0.0.1:{port}",
        "--extender-listen",
        f"127.0.0.1:{extender_port}",
        "--metrics-listen",
        f"127.0.0.1:{free_port()}",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the scheduler did not become ready")


def measure(nodes: int, requests: int, threads: int, directory: Path) -> dict[str, float]:
    extender_port = free_port()
    process = start(cluster_file(directory, nodes), free_port(), extender_port)
    names = [f"node-{n:04d}" for n in range(nodes)]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{extender_port}", timeout=30) as client:

            def one(i: int) -> float:
                body = {"Pod": pod(f"p{nodes}-{i}"), "Nodes": None, "NodeNames": names}
                started = time.perf_counter()
                reply = client.post("/filter", json=body).json()
                elapsed = time.perf_counter() - started
                if reply["Error"] or not reply["NodeNames"]:
                    raise SystemExit(f"filter failed: {reply}")
                return elapsed

            for i in range(10):  # warm up
                one(-1 - i)
            latencies = sorted(one(i) for i in range(requests))
            started = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(one, range(requests, 2 * requests)))
            throughput = requests / (time.perf_counter() - started)
    finally:
        process.terminate()
        process.wait(15)
    return {
        "median_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[max(0, round(len(latencies) * 0.99) - 1)] * 1000,
        "throughput": throughput,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="node counts, comma separated")
    parser.add_argument("--requests", type=int, default=200, help="filters per measurement")
    parser.add_argument("--threads", type=int, default=8, help="clients for the throughput run")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"filter over HTTP, {CARDS} cards per node, all nodes sent as NodeNames")
    print(
        f"{'nodes':>6} {'cards':>6} {'median ms':>10} {'p99 ms':>8} "
        f"{'filters/s (' + str(args.threads) + ' clients)':>24}"
    )
    with tempfile.TemporaryDirectory() as directory:
        for nodes in sizes:
            if nodes * CARDS * 10 < 2 * args.requests + 10:
                raise SystemExit(f"{nodes} nodes have too few slices for {args.requests} pods")
            r = measure(nodes, args.requests, args.threads, Path(directory))
            print(
                f"{nodes:>6} {nodes * CARDS:>6} {r['median_ms']:>10.2f} {r['p99_ms']:>8.2f} "
                f"{r['throughput']:>24.0f}"
            )


if __name__ == "__main__":
    main()
