"""Drive a pod trace through a running `vgpu scheduler` over HTTP, playing kube-scheduler.

The cluster is a fake-cluster file written from milli-GPU nodes (`cluster_file`): each node's
cards as the trace's device plugin registers them (`trace.hami`), its allocatable CPU and
memory, and pods already running on it. Nodes are named in the order of their rank
(`node-0000` first), so the scheduler's ties by name are the replay's ties by rank.

For each pod of the stream `drive` does what kube-scheduler does: its resource filter (the
nodes whose free CPU and memory cover the pod's requests, counted on its own copy of the
cluster) gives the candidates; a GPU pod goes to `/filter` with them and, when a node comes
back, to `/bind`. A CPU-only pod never reaches the extender (`managedResources`): kube-scheduler
picks its node, here the replay's choice while the run follows the replay (else the first
candidate), and the driver asks `/filter` (which creates the pod in fake-cluster mode) and
`/bind` for it, so the scheduler counts its CPU as it would a bound pod's from the API server.

With a replay (`oracle`: the replay's node index under the same policy) every GPU pod's node is
compared with the replay's as it comes; after the first difference the two runs part, and the
comparison stops. Each pod's cards come from the scheduler's metrics at the end
(`granted_cards`).
"""

import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from vgpu.app.simulate.trace.hami import hami_devices, hami_manifest
from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.app.simulate.trace.protocol import percent, share
from vgpu.domain import NVIDIA, DeviceGrant, encode_pod_grants
from vgpu.domain.fragmentation import MILLI, MilliNode, MilliPod, place
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION

NAMESPACE = "trace"
# Without a device plugin nothing releases a node's lock after a bind: a lock older than this
# (seconds) is taken over, so that the next pod can be bound to the same node.
LOCK_EXPIRY = "0.000001"


def node_name(index: int) -> str:
    return f"node-{index:04d}"


@dataclass(frozen=True, slots=True)
class Running:
    """A pod already on the cluster when the scheduler starts: its node and cards."""

    name: str
    node: int
    cards: tuple[int, ...]
    pod: MilliPod


def cluster_file(path: Path, nodes: Sequence[MilliNode], running: Sequence[Running] = ()) -> Path:
    """The fake-cluster file for `nodes` (all free) with the `running` pods bound on them."""
    body = {
        "nodes": [
            {
                "name": node_name(i),
                "gpus": [
                    {
                        "uuid": d.uuid,
                        "type": d.type,
                        "memory": d.memory,
                        "count": d.count,
                        "cores": d.cores,
                    }
                    for d in hami_devices(node_name(i), node)
                ],
                "allocatable": {"cpu": f"{node.cpu}m", "memory": f"{node.memory}Mi"},
            }
            for i, node in enumerate(nodes)
        ],
        "pods": [_running_manifest(r, nodes[r.node]) for r in running],
    }
    path.write_bytes(orjson.dumps(body))
    return path


def start_env(policy: str, typical_shapes_file: Path | None) -> dict[str, str]:
    """The scheduler's settings: `policy` as node and GPU policy (`default`: HAMi's)."""
    env = {"VGPU_LOG_LEVEL": "WARNING", "VGPU_LOCK_EXPIRY": LOCK_EXPIRY}
    if policy != "default":
        env["VGPU_NODE_POLICY"] = env["VGPU_GPU_POLICY"] = policy
    if typical_shapes_file is not None:
        env["VGPU_FRAGMENTATION__TYPICAL_SHAPES_FILE"] = str(typical_shapes_file)
    return env


def after_running(nodes: Sequence[MilliNode], running: Sequence[Running]) -> list[MilliNode]:
    """The nodes once the running pods hold their CPU, memory and cards."""
    after = list(nodes)
    for r in running:
        after[r.node] = place(after[r.node], r.pod, r.cards)
    return after


@dataclass
class Outcome:
    """What a run gave: each pod's node (None: it fit nowhere), the /filter latency of each GPU
    pod (seconds), the GPU allocated (percent of the cluster's) at each arrived percent, and
    against a replay: the pods compared and the first that went elsewhere (None: none did)."""

    nodes: list[int | None] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    allocation: dict[int, float] = field(default_factory=dict)
    compared: int = 0
    diverged: int | None = None
    expected_cards: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)


class Extender:
    """POSTs to the extender verbs on one keep-alive HTTP/1.1 connection, as kube-scheduler
    does, with as little client as HTTP allows (a request written in one piece, the reply read
    by its Content-Length; bodies through orjson), so that a call's time is the scheduler's
    more than the client's: `http.client` added about 0.1 ms a call on the development machine,
    a third of the whole exchange with a server that does nothing."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._connection: tuple[socket.socket, BinaryIO] | None = None  # on the first call

    def call(self, path: str, body: Any) -> Any:
        if self._connection is None:
            connection = socket.create_connection(("127.0.0.1", self._port), timeout=60)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._connection = connection, connection.makefile("rb")
        connection, replies = self._connection
        payload = orjson.dumps(body)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        )
        connection.sendall(head.encode() + payload)
        status = replies.readline()
        length = None
        while (line := replies.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise AssertionError(f"{path}: a reply without Content-Length ({status!r})")
        return orjson.loads(replies.read(length))

    def close(self) -> None:
        if self._connection is not None:
            connection, replies = self._connection
            replies.close()
            connection.close()


def drive(
    extender: Extender,
    nodes: Sequence[MilliNode],
    stream: Sequence[MilliPod],
    oracle: NodeIndex | None = None,
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """Schedule `stream` in order on `nodes` (their state as the scheduler starts, in rank
    order) through the extender; `oracle` is the replay to compare with, on the same nodes."""
    mirror = list(nodes)
    cards = sum(len(n.free) for n in nodes)
    outcome = Outcome()
    arrived = used = 0
    sums: dict[int, list[float]] = {}
    for i, pod in enumerate(stream):
        name = f"p{i}"
        candidates = [
            j for j, n in enumerate(mirror) if n.cpu >= pod.cpu and n.memory >= pod.memory
        ]
        expected = oracle.choose(pod) if oracle is not None else None
        manifest = _pending(name, pod)
        names = [node_name(j) for j in candidates]
        if pod.gpus:
            started = time.perf_counter()
            reply = extender.call("/filter", {"Pod": manifest, "Nodes": None, "NodeNames": names})
            outcome.latencies.append(time.perf_counter() - started)
            if reply.get("Error"):
                raise AssertionError(f"pod {name}: /filter failed: {reply['Error']}")
            chosen = _index(reply.get("NodeNames") or [])
        else:
            chosen = expected if oracle is not None else next(iter(candidates), None)
            extender.call("/filter", {"Pod": manifest, "Nodes": None, "NodeNames": names})
        if oracle is not None:
            if chosen != expected:
                outcome.diverged, oracle = i, None
            else:
                outcome.compared += 1
                if expected is not None:
                    placed = oracle.place(expected, pod)
                    if pod.gpus:
                        outcome.expected_cards[name] = (expected, placed)
        if chosen is not None:
            bind = {"PodName": name, "PodNamespace": NAMESPACE, "PodUID": _uid(name)}
            error = extender.call("/bind", {**bind, "Node": node_name(chosen)})["Error"]
            if error:
                raise AssertionError(f"pod {name}: /bind to {node_name(chosen)} failed: {error}")
            mirror[chosen] = place(mirror[chosen], pod, ())
            used += pod.gpu_milli
        outcome.nodes.append(chosen)
        arrived += pod.gpu_milli
        sums.setdefault(percent(arrived, cards), []).append(share(used, cards))
        if progress is not None:
            progress(i)
    outcome.allocation = {x: round(sum(v) / len(v), 2) for x, v in sorted(sums.items())}
    return outcome


def granted_cards(metrics: str) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Each trace pod's node and card indexes, read from the scheduler's
    `hami_vgpu_core_allocated_ratio` samples (one per pod and card)."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, tuple[int, list[int]]] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            labels = sample.labels
            if sample.name != "hami_vgpu_core_allocated_ratio" or labels["namespace"] != NAMESPACE:
                continue
            node = int(labels["node"].rsplit("-", 1)[1])
            card = int(labels["device_uuid"].rsplit("-", 1)[1])
            found.setdefault(labels["pod"], (node, []))[1].append(card)
    return {pod: (node, tuple(sorted(cards))) for pod, (node, cards) in found.items()}


def until_arrived(stream: Sequence[MilliPod], cards: int, most: int) -> list[MilliPod]:
    """The stream's pods up to the last at which at most `most` % of the GPU has arrived."""
    kept, arrived = [], 0
    for pod in stream:
        arrived += pod.gpu_milli
        if percent(arrived, cards) > most:
            break
        kept.append(pod)
    return kept


def _index(names: Sequence[str]) -> int | None:
    if not names:
        return None
    [name] = names
    return int(name.rsplit("-", 1)[1])


def _uid(name: str) -> str:
    return f"uid-{name}"


def _pending(name: str, pod: MilliPod) -> dict[str, Any]:
    manifest = hami_manifest(name, pod, {})
    if not pod.gpus:  # no GPU limits at all: a plain pod
        del manifest["spec"]["containers"][0]["resources"]["limits"]
    manifest["metadata"]["uid"] = _uid(name)
    manifest["spec"]["schedulerName"] = "vgpu-scheduler"
    manifest["status"] = {"phase": "Pending"}
    return manifest


def _running_manifest(running: Running, node: MilliNode) -> dict[str, Any]:
    manifest = _pending(running.name, running.pod)
    name = node_name(running.node)
    devices = hami_devices(name, node)
    grants = tuple(
        DeviceGrant(
            devices[c].uuid,
            NVIDIA.word,
            devices[c].memory * running.pod.milli // MILLI,
            running.pod.milli // 10,
        )
        for c in running.cards
    )
    manifest["metadata"]["annotations"] = {
        ASSIGNED_NODE_ANNOTATION: name,
        NVIDIA.allocated_annotation: encode_pod_grants((grants,)),
    }
    manifest["spec"]["nodeName"] = name
    manifest["status"] = {"phase": "Running"}
    return manifest
