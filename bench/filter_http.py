"""Filter latency over HTTP: a real `vgpu scheduler --fake-cluster` process, kube-scheduler's
JSON, clusters of a few sizes. Prints median, p99, the scheduler's CPU time per filter (steadier
than latency on a shared machine), filter throughput and filter+bind throughput; asserts nothing.

    .venv/bin/python bench/filter_http.py [--sizes 10,100,1000] [--pods-per-node 20]
                                          [--requests 200] [--threads 8] [--combined]
                                          [--client stdlib|httpx] [--policies default,fgd]

Every node has 8 cards (24000 MiB, split 10) and `--pods-per-node` running pods already holding
1000 MiB each (1000 nodes x 20 = the 20k pods of issue 9); each new pod asks for 1 card with
1000 MiB and 5 % cores, so no pod is ever refused; kube-scheduler sends every node name
(nodeCacheCapable). The filter+bind run is what kube-scheduler does per pod in HAMi's set-up;
without a device plugin nothing releases a node's lock after its bind, so that run needs at
least two nodes per pod (and is skipped, `nan`, on smaller clusters).

`--combined` runs the scheduler with `combine_scores: true`: each measured call is a /filter
(every feasible node comes back) followed by a /prioritize of those nodes, as kube-scheduler
does in that set-up; the figures are for the pair, and the filter+bind run is skipped.

Also measured: a pod that fits nowhere (8 whole cards, exclusively, on nodes whose every card
is in use), the first call for that pod and the median of 20 retries (kube-scheduler retries an
unschedulable pod); and the slowest `/healthz` answer while the 8 clients run.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson

CARDS = 8
DEFAULT_POLICY = "default"
JSON = {"content-type": "application/json"}


def running_pod(node: int, index: int) -> dict[str, Any]:
    """A pod already holding 1000 MiB of one of the node's cards."""
    card = f"GPU-{node:04d}-{index % CARDS}"
    body = pod(f"run-{node:04d}-{index}")
    body["metadata"]["annotations"] = {
        "hami.io/vgpu-node": f"node-{node:04d}",
        "hami.io/vgpu-devices-allocated": f"{card},NVIDIA,1000,5:;",
    }
    body["spec"]["nodeName"] = f"node-{node:04d}"
    body["status"] = {"phase": "Running"}
    return body


def cluster_file(directory: Path, nodes: int, pods_per_node: int) -> Path:
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
        ],
        "pods": [running_pod(n, i) for n in range(nodes) for i in range(pods_per_node)],
    }
    path = directory / f"cluster-{nodes}.json"
    path.write_text(json.dumps(body))
    return path


def resident_mib(pid: int) -> float:
    """The process's resident memory (Linux /proc), in MiB; nan elsewhere."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    rss = [line for line in status.splitlines() if line.startswith("VmRSS")]
    kib = int(rss[0].split()[1]) if rss else 0
    return kib / 1024


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used (Linux /proc: user + system), in seconds; nan elsewhere.
    Less disturbed than latency by other work on a shared machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def pod(name: str, limits: dict[str, int] | None = None) -> dict[str, Any]:
    limits = limits or {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 5}
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


def start(
    path: Path, port: int, extender_port: int, combined: bool, policy: str = DEFAULT_POLICY
) -> subprocess.Popen[bytes]:
    """The scheduler with its webhook (and /readyz) on `port`, the verbs on `extender_port`,
    `policy` its node and GPU policy (`default`: HAMi's binpack and spread)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env["VGPU_LOG_LEVEL"] = "WARNING"
    env["VGPU_COMBINE_SCORES"] = "true" if combined else "false"
    if policy != DEFAULT_POLICY:
        env["VGPU_NODE_POLICY"] = env["VGPU_GPU_POLICY"] = policy
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
        "--explain-listen",
        f"127.0.0.1:{free_port()}",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the scheduler did not become ready")


class Client:
    """POSTs JSON to the extender and decodes the reply, on one keep-alive connection per
    thread. Bodies go through orjson, and by default the connection is the standard library's
    `http.client`, so that the figures are the scheduler's time more than the client's: a
    reply naming 5,000 failed nodes is 0.9 MB, which httpx (`--client httpx`, the client of
    the earlier figures) reads in about 1.3 ms more."""

    def __init__(self, port: int, kind: str) -> None:
        self._port = port
        self._kind = kind
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection | httpx.Client] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        for connection in self._opened:
            connection.close()

    def call(self, path: str, body: Any) -> Any:
        content = orjson.dumps(body)
        if self._kind == "httpx":
            client = self._connection(lambda: httpx.Client(timeout=30))
            url = f"http://127.0.0.1:{self._port}{path}"
            return orjson.loads(client.post(url, content=content, headers=JSON).content)
        connection = self._connection(
            lambda: http.client.HTTPConnection("127.0.0.1", self._port, timeout=30)
        )
        connection.request("POST", path, body=content, headers=JSON)
        return orjson.loads(connection.getresponse().read())

    def _connection(self, open_one: Any) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = open_one()
            with self._lock:
                self._opened.append(connection)
        return connection


def measure(
    nodes: int,
    pods_per_node: int,
    requests: int,
    threads: int,
    directory: Path,
    combined: bool,
    client_kind: str,
    policy: str = DEFAULT_POLICY,
) -> dict[str, float]:
    extender_port = free_port()
    started_at = time.perf_counter()
    path = cluster_file(directory, nodes, pods_per_node)
    process = start(path, free_port(), extender_port, combined, policy)
    ready_s = time.perf_counter() - started_at
    rss_mib = resident_mib(process.pid)
    names = [f"node-{n:04d}" for n in range(nodes)]
    try:
        with Client(extender_port, client_kind) as client:

            def one(i: int) -> float:
                body = {"Pod": pod(f"p{nodes}-{i}"), "Nodes": None, "NodeNames": names}
                started = time.perf_counter()
                reply = client.call("/filter", body)
                elapsed = time.perf_counter() - started
                if reply["Error"] or not reply["NodeNames"]:
                    raise SystemExit(f"filter failed: {reply}")
                if combined:
                    started = time.perf_counter()
                    body["NodeNames"] = reply["NodeNames"]
                    scores = client.call("/prioritize", body)
                    elapsed += time.perf_counter() - started
                    if len(scores) != len(reply["NodeNames"]):
                        raise SystemExit(f"prioritize failed: {scores}")
                return elapsed

            def placed(i: int) -> None:
                manifest = pod(f"p{nodes}-{i}")
                # no device plugin here to release each node lock after Allocate: spread the
                # pods so that concurrent binds meet different nodes, as on a busy cluster
                manifest["metadata"]["annotations"] = {"hami.io/node-scheduler-policy": "spread"}
                body = {"Pod": manifest, "Nodes": None, "NodeNames": names}
                [node] = client.call("/filter", body)["NodeNames"]
                meta = manifest["metadata"]
                bind = {"PodName": meta["name"], "PodNamespace": "bench", "PodUID": meta["uid"]}
                error = client.call("/bind", {**bind, "Node": node})["Error"]
                if error:
                    raise SystemExit(f"bind failed: {error}")

            def refused() -> float:
                whole = {"nvidia.com/gpu": CARDS, "nvidia.com/gpucores": 100}
                body = {"Pod": pod(f"whole-{nodes}", whole), "Nodes": None, "NodeNames": names}
                started = time.perf_counter()
                reply = client.call("/filter", body)
                elapsed = time.perf_counter() - started
                if reply["Error"] or reply["NodeNames"] or len(reply["FailedNodes"]) != nodes:
                    raise SystemExit(f"the pod that fits nowhere was answered {reply}")
                return elapsed

            for i in range(10):  # warm up
                one(-1 - i)
            cpu_before = cpu_seconds(process.pid)
            latencies = sorted(one(i) for i in range(requests))
            cpu_per_call = (cpu_seconds(process.pid) - cpu_before) / requests
            no_fit_first = refused()
            no_fit_again = statistics.median(refused() for _ in range(20))
            health = Health(f"http://127.0.0.1:{extender_port}/healthz")
            started = time.perf_counter()
            with health, ThreadPoolExecutor(threads) as pool:
                list(pool.map(one, range(requests, 2 * requests)))
            throughput = requests / (time.perf_counter() - started)
            bound = float("nan")  # each bind keeps its node locked: needs a node per pod
            if nodes >= 2 * requests and not combined:
                started = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(placed, range(2 * requests, 3 * requests)))
                bound = requests / (time.perf_counter() - started)
    finally:
        process.terminate()
        process.wait(15)
    return {
        "ready_s": ready_s,
        "rss_mib": rss_mib,
        "median_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[max(0, round(len(latencies) * 0.99) - 1)] * 1000,
        "cpu_ms": cpu_per_call * 1000,
        "throughput": throughput,
        "bound_per_s": bound,
        "no_fit_first_ms": no_fit_first * 1000,
        "no_fit_again_ms": no_fit_again * 1000,
        "healthz_max_ms": health.slowest * 1000,
    }


class Health:
    """Asks `url` every 10 ms on its own connection while in use; `slowest` answer, seconds."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self.slowest = 0.0

    def __enter__(self) -> "Health":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.wait(0.01):
                started = time.perf_counter()
                client.get(self._url).raise_for_status()
                self.slowest = max(self.slowest, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="node counts, comma separated")
    parser.add_argument("--requests", type=int, default=200, help="filters per measurement")
    parser.add_argument(
        "--pods-per-node", type=int, default=20, help="running pods each node already holds"
    )
    parser.add_argument("--threads", type=int, default=8, help="clients for the throughput run")
    parser.add_argument(
        "--combined", action="store_true", help="combine_scores: true, /filter + /prioritize"
    )
    parser.add_argument(
        "--client", choices=("stdlib", "httpx"), default="stdlib", help="the HTTP client"
    )
    parser.add_argument(
        "--policies",
        default=DEFAULT_POLICY,
        help="the scheduler's node and GPU policy, one run each in this order: default "
        "(HAMi's binpack/spread) or fgd, comma separated (e.g. default,fgd)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    verbs = "/filter + /prioritize (combine_scores)" if args.combined else "filter"
    print(
        f"{verbs} over HTTP ({args.client} client), {CARDS} cards per node, "
        "all nodes sent as NodeNames"
    )
    print(
        f"{'policy':>8} {'nodes':>6} {'pods':>6} {'ready s':>8} {'RSS MiB':>8} {'median ms':>10} "
        f"{'p99 ms':>8} {'CPU ms':>7} {'filters/s':>10} {'filter+bind pods/s':>19} "
        f"{'no-fit first ms':>16} {'no-fit retry ms':>16} {'healthz max ms':>15}   "
        f"({args.threads} clients)"
    )
    with tempfile.TemporaryDirectory() as directory:
        for nodes, policy in ((n, p) for n in sizes for p in args.policies.split(",")):
            held = nodes * args.pods_per_node
            if nodes * CARDS * 10 < held + 3 * args.requests + 10:
                raise SystemExit(f"{nodes} nodes have too few slices for {args.requests} pods")
            r = measure(
                nodes,
                args.pods_per_node,
                args.requests,
                args.threads,
                Path(directory),
                args.combined,
                args.client,
                policy,
            )
            print(
                f"{policy:>8} {nodes:>6} {held:>6} {r['ready_s']:>8.1f} {r['rss_mib']:>8.0f} "
                f"{r['median_ms']:>10.2f} "
                f"{r['p99_ms']:>8.2f} {r['cpu_ms']:>7.2f} {r['throughput']:>10.0f} "
                f"{r['bound_per_s']:>19.0f} "
                f"{r['no_fit_first_ms']:>16.2f} {r['no_fit_again_ms']:>16.2f} "
                f"{r['healthz_max_ms']:>15.2f}"
            )


if __name__ == "__main__":
    main()
