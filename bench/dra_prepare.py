"""What NodePrepareResources of a one-device claim costs `vgpu dra-driver`, and how often it
writes its ResourceSlice.

Prepare goes over the real gRPC unix socket the kubelet uses, into the driver's container as
`vgpu dra-driver` builds it: the claim read from the API (in memory, or over HTTP through the
Kubernetes client from a plain server that answers from a dict: the client's cost without an
API server's own), the pod that uses it read, the node's ledger checked (10 claims already
prepared on the node), the claim's directories and CDI spec written and its record saved on
disk with fsync before the answer. Each Prepare is followed by an Unprepare
(not timed) so the node stays the same. Beside it, in the same run: the gRPC round trip of a
Prepare with no claim (the floor any driver pays), and the record's durable save alone. The
third row has NVIDIA's static CDI spec on the node, as `nvidia-ctk cdi generate` writes it for
eight GPUs (about 14 KB of YAML), which the default `gpu_visibility: auto` looks in.

The second table counts the slice writes over publish rounds while GPUs turn unhealthy and
healthy again: a round with nothing changed writes nothing.

    .venv/bin/python bench/dra_prepare.py [--calls 300]
"""

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.dra.kubelet import FakeDraKubelet
from tests.unit.dra_driver.node import UUID_B, claim_json, make_node, ref, share
from vgpu.adapters.kubernetes.connection import ConnectionSettings
from vgpu.adapters.kubernetes.dra import KubernetesDraApi

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims"
PODS = "/api/v1/namespaces/ml/pods"


class JsonApi:
    """GET of the objects put here, over HTTP/1.1 with keep-alive, from a background thread."""

    def __init__(self) -> None:
        objects: dict[str, bytes] = {}
        self.objects = objects

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else the body waits for the headers' ACK (40 ms)

            def do_GET(self) -> None:
                body = objects.get(self.path.partition("?")[0])
                self.send_response(200 if body is not None else 404)
                body = body or b'{"kind":"Status","code":404,"message":"not found"}'
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def put(self, collection: str, manifest: dict[str, Any]) -> None:
        self.objects[f"{collection}/{manifest['metadata']['name']}"] = json.dumps(manifest).encode()

    def close(self) -> None:
        self._server.shutdown()


def percentiles(took: list[float]) -> tuple[float, float]:
    took = sorted(took)
    return statistics.median(took) * 1000, took[max(int(len(took) * 0.99) - 1, 0)] * 1000


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


LIBRARIES = ("cuda", "nvidia-ml", "nvidia-ptxjitcompiler", "nvidia-opencl", "nvidia-nvvm",
             "nvidia-gpucomp", "nvidia-encode", "nvidia-opticalflow", "nvcuvid", "nvidia-cfg",
             "nvidia-allocator", "nvidia-eglcore", "nvidia-glcore", "nvidia-tls", "nvidia-glsi",
             "nvidia-fbc", "nvidia-rtcore", "nvoptix", "GLX_nvidia", "EGL_nvidia")


def nvidia_spec(gpus: int = 8) -> str:
    """A static spec shaped as nvidia-ctk's: each GPU by index and by uuid, `all`, and the
    driver's device nodes, libraries and hooks."""
    def gpu(name: str, i: int) -> dict[str, Any]:
        link = f"../card{i + 1}::/dev/dri/by-path/pci-0000:{i:02x}:00.0-card"
        return {"name": name, "containerEdits": {
            "deviceNodes": [{"path": f"/dev/nvidia{i}"}, {"path": f"/dev/dri/card{i + 1}"}],
            "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                       "args": ["nvidia-cdi-hook", "create-symlinks", "--link", link]}]}}

    uuids = [f"GPU-{i:08x}-0000-4000-8000-000000000000" for i in range(gpus)]
    devices = [gpu(str(i), i) for i in range(gpus)] + [gpu(u, i) for i, u in enumerate(uuids)]
    library = "/usr/lib/x86_64-linux-gnu/lib{}.so.550.54.15"
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [*devices, {"name": "all", "containerEdits": {
            "deviceNodes": [{"path": f"/dev/nvidia{i}"} for i in range(gpus)]}}],
        "containerEdits": {
            "deviceNodes": [{"path": f"/dev/nvidia{n}"} for n in ("ctl", "-uvm", "-uvm-tools")],
            "mounts": [{"hostPath": library.format(n), "containerPath": library.format(n),
                        "options": ["ro", "nosuid", "nodev", "bind"]} for n in LIBRARIES * 2],
        },
    }
    return yaml.safe_dump(spec)


def measure(
    root: Path, calls: int, http: JsonApi | None, nvidia: bool = False
) -> dict[str, list[float]]:
    node = make_node(root)
    if nvidia:
        (root / "etc-cdi").mkdir(parents=True)
        (root / "etc-cdi" / "nvidia.yaml").write_text(nvidia_spec())
    if http is not None:
        node.container.dra_api.override(KubernetesDraApi.connect(ConnectionSettings(host=http.url)))

    def put_claim(manifest: dict[str, Any]) -> None:
        node.api.put_claim(manifest) if http is None else http.put(CLAIMS, manifest)

    def put_pod(manifest: dict[str, Any]) -> None:
        node.api.put_pod(manifest) if http is None else http.put(PODS, manifest)

    preparer = node.container.preparer()
    for i in range(10):  # the node is busy: ten shares of the second GPU are prepared
        held = claim_json(f"held-{i}", share("gpu-1", 1000, 5, share_id=f"held-{i}"))
        put_claim(held)
        assert preparer.prepare([ref(held)])[f"uid-held-{i}"].error == ""
    kubelet = FakeDraKubelet(root / "registry")
    (root / "registry").mkdir()
    plugin = node.container.kubelet()
    plugin.serve(node.container.service())
    kubelet.discover()
    manifests = []
    for i in range(calls):
        manifest = claim_json(f"c{i}", share(share_id=f"s{i}"), pods=((f"c{i}", f"uid-c{i}"),))
        put_claim(manifest)
        put_pod(pod(f"c{i}"))
        manifests.append(manifest)
    took: dict[str, list[float]] = {"floor": [], "prepare": []}
    try:
        for manifest in manifests:
            meta = manifest["metadata"]
            claim = (meta["namespace"], meta["name"], meta["uid"])
            start = time.perf_counter()
            kubelet.prepare()
            took["floor"].append(time.perf_counter() - start)
            start = time.perf_counter()
            answer = kubelet.prepare(claim)[meta["uid"]]
            took["prepare"].append(time.perf_counter() - start)
            assert answer.error == "", answer.error
            kubelet.unprepare(claim)
    finally:
        kubelet.close()
        plugin.stop()
    prepared = node.container.prepared()
    took["save"] = []
    for _ in range(calls):
        claim = next(iter(prepared.entries().values()))
        start = time.perf_counter()
        prepared.add(claim)
        took["save"].append(time.perf_counter() - start)
    return took


def slice_writes(root: Path, rounds: int, changes: int) -> tuple[int, int]:
    """Publish `rounds` times; `changes` times along the way a GPU turns unhealthy, then
    healthy again. The writes the publisher sent and those the API received."""
    node = make_node(root)
    publisher = node.container.publisher()
    gpus = node.container.gpus()
    at = {rounds * (i + 1) // (changes + 1): i for i in range(changes)}
    for i in range(rounds):
        if i in at:
            if at[i] % 2 == 0:
                node.gpus.mark_unhealthy(UUID_B, "Xid 79")
            else:
                node.gpus.mark_healthy(UUID_B)
            gpus.apply(node.gpus.wait_for_health_events(0))
        publisher.publish()
    return publisher.writes, node.api.writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    print(f"NodePrepareResources of a one-device claim over gRPC, {calls} calls, 10 claims "
          "already prepared on the node; milliseconds")
    print(f"{'API':<24}{'floor p50':>10}{'prepare p50':>13}{'p99':>8}{'record save p50':>17}")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        http = JsonApi()
        try:
            rows = (
                ("in memory", None, False),
                ("HTTP, client", http, False),
                ("in memory, NVIDIA spec", None, True),
            )
            for i, (label, api, nvidia) in enumerate(rows):
                took = measure(Path(tmp) / str(i), calls, api, nvidia)
                floor, _ = percentiles(took["floor"])
                p50, p99 = percentiles(took["prepare"])
                save, _ = percentiles(took["save"])
                print(f"{label:<24}{floor:>10.2f}{p50:>13.2f}{p99:>8.2f}{save:>17.2f}")
        finally:
            http.close()
        rounds, changes = 1000, 4
        writes, counted = slice_writes(Path(tmp) / "slices", rounds, changes)
        print(f"\nslice publishing: {rounds} rounds, {changes} health changes (a GPU unhealthy "
              f"and healthy again, twice): {writes} writes sent, {counted} received by the API "
              f"(the first, plus one per change: {1 + changes})")


if __name__ == "__main__":
    main()
