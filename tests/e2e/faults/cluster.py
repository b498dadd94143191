"""Scheduler replicas behind fault proxies, GPU nodes, pods, and kube-scheduler's two verbs.

`FaultCluster` is the one place that starts processes and knows their addresses: each replica
is a real `vgpu scheduler` whose kubeconfig points at its own `FaultProxy` in front of the API
emulator. Scenarios reach a replica only through `Scheduler` (verbs with a timeout, readiness,
metrics), so an address that moves is changed in one place.

`LockReleaser` stands in for the device plugin's part of HAMi's node lock: it clears
`hami.io/mutex.lock` once the pod that holds it is bound or gone (or after `stale` seconds),
so that binds to one node can follow each other, as on a real node.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.faults.proxy import FaultProxy
from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from tests.e2e.scheduler.harness import SchedulerProcess, wait_until
from vgpu.domain import DomainError
from vgpu.domain.nodelock import parse_node_lock
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION, NVIDIA

SCHEDULER_NAME = "vgpu-scheduler"
NODES = "/api/v1/nodes"
ELECTION = {
    "VGPU_LEADER_ELECTION__ENABLED": "true",
    "VGPU_LEADER_ELECTION__NAMESPACE": "default",
    "VGPU_LEADER_ELECTION__LEASE_DURATION": "4",
    "VGPU_LEADER_ELECTION__RENEW_DEADLINE": "3",
    "VGPU_LEADER_ELECTION__RETRY_PERIOD": "0.5",
}


def pods_path(namespace: str = "default") -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


class Scheduler(SchedulerProcess):
    """A scheduler process that can also be killed with SIGKILL and asked with short timeouts.

    The harness gives every process free ports for its four listeners (webhook and health,
    extender verbs, metrics, explain), so replicas never collide.
    """

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, whatever the process was in the middle of."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        self._process = None

    def is_ready(self) -> bool:
        """/readyz answers 200 now (False for any other answer or none)."""
        try:
            return self.client.get("/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def synced(self) -> bool:
        """The process has read the cluster (leader or not); False while it is not serving."""
        try:
            return "hami_scheduler_cache_synced 1.0" in self.metrics_text()
        except httpx.HTTPError:
            return False

    def metrics_text(self) -> str:
        return self.scrape.get("/metrics", timeout=10.0).text

    def try_filter(
        self, pod: Mapping[str, Any], nodes: list[str], timeout: float = 10.0
    ) -> dict[str, Any] | None:
        """kube-scheduler's /filter; None when no answer came in `timeout` (it gives up)."""
        body = {"Pod": pod, "Nodes": None, "NodeNames": nodes}
        return self._post("/filter", body, timeout)

    def try_bind(self, pod: Mapping[str, Any], node: str, timeout: float = 10.0) -> str | None:
        """kube-scheduler's /bind: the error ('' when bound), or None when no answer came."""
        meta = pod["metadata"]
        body = {
            "PodName": meta["name"],
            "PodNamespace": meta.get("namespace", "default"),
            "PodUID": meta.get("uid", ""),
            "Node": node,
        }
        reply = self._post("/bind", body, timeout)
        return None if reply is None else str(reply.get("Error", ""))

    def _post(self, verb: str, body: Mapping[str, Any], timeout: float) -> dict[str, Any] | None:
        try:
            response = self.extender.post(verb, json=body, timeout=timeout)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return {"Error": f"HTTP {response.status_code}: {response.text[:200]}"}
        data: dict[str, Any] = response.json()
        return data


@dataclass
class Replica:
    """A scheduler process and the proxy that is its only way to the API."""

    name: str
    process: Scheduler
    proxy: FaultProxy


class FaultCluster:
    """An API emulator with GPU nodes, and scheduler replicas each behind its own proxy."""

    def __init__(self, api: RunningApiServer, workdir: Path, seed: int = 0) -> None:
        self.api = api
        self.workdir = workdir
        self.seed = seed
        self.replicas: list[Replica] = []
        self.nodes: list[str] = []
        # the proxies log what each replica sent; the emulator's own log would only slow down
        api.emulator.request_log_limit = 50

    def add_node(self, name: str, cards: int = 1, memory: int = 10000, split: int = 4) -> None:
        register = [
            {
                "id": f"GPU-{name}-{i}",
                "index": i,
                "count": split,
                "devmem": memory,
                "devcore": 100,
                "type": "NVIDIA-Tesla T4",
                "health": True,
            }
            for i in range(cards)
        ]
        annotations = {NVIDIA.register_annotation: json.dumps(register)}
        # what kubelet reports with the device plugin running: the handshake keeps such a node
        allocatable = {NVIDIA.count_resource: str(cards * split)}
        self.api.create(NODES, node_manifest(name, annotations=annotations, allocatable=allocatable))
        self.nodes.append(name)

    def replica(
        self,
        name: str,
        *,
        election: bool = False,
        env: Mapping[str, str] | None = None,
        ready: bool = True,
    ) -> Replica:
        """Start `vgpu scheduler` behind a new proxy; waits for /readyz unless `ready=False`."""
        proxy = FaultProxy(self.api.url, seed=self.seed + len(self.replicas)).start()
        kubeconfig = proxy.kubeconfig(self.workdir / f"{name}.kubeconfig")
        settings = dict(ELECTION) if election else {}
        if election:
            settings["VGPU_LEADER_ELECTION__IDENTITY"] = name
        settings.update(env or {})
        process = Scheduler(self.workdir, ["--kubeconfig", str(kubeconfig)], settings, name=name)
        replica = Replica(name, process, proxy)
        self.replicas.append(replica)
        process.start(ready=ready)
        return replica

    def leader(self, *candidates: Replica, timeout: float = 30.0) -> Replica:
        """The one replica that reports ready (waits for one)."""
        found: list[Replica] = []

        def one_ready() -> bool:
            found[:] = [r for r in candidates if r.process.is_ready()]
            return len(found) == 1

        assert wait_until(one_ready, timeout), "no single leader:\n" + self.logs()
        return found[0]

    def create_pod(
        self, name: str, memory: int, cores: int = 0, count: int = 1, namespace: str = "default"
    ) -> dict[str, Any]:
        """A pending GPU pod as the webhook would have left it (schedulerName set)."""
        limits = {
            "nvidia.com/gpu": count,
            "nvidia.com/gpumem": memory,
            "nvidia.com/gpucores": cores,
        }
        manifest = pod_manifest(namespace, name, limits=limits, scheduler_name=SCHEDULER_NAME)
        return self.api.create(pods_path(namespace), manifest)

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        found = self.api.get(f"{pods_path(namespace)}/{name}")
        assert found is not None, f"pod {namespace}/{name} is gone"
        return found

    def release_lock(self, node: str) -> None:
        """What the device plugin does once it has served a pod's Allocate."""
        self.api.merge_patch(
            f"{NODES}/{node}", {"metadata": {"annotations": {NODE_LOCK_ANNOTATION: None}}}
        )

    def scrapes(self, *replicas: Replica) -> dict[str, Any]:
        """name -> a function returning that replica's /metrics, for the ledger checks."""
        return {r.name: r.process.metrics_text for r in replicas}

    def logs(self) -> str:
        return "\n".join(f"--- {r.name}\n{r.process.logs()[-4000:]}" for r in self.replicas)

    def close(self) -> None:
        for replica in self.replicas:
            replica.proxy.clear()  # hung calls go on, so the process can stop
            replica.process.close()
            replica.proxy.stop()


class LockReleaser:
    """Clears node locks as the device plugin would once their pod is placed (see module doc)."""

    def __init__(self, api: RunningApiServer, stale: float = 2.0) -> None:
        self._api = api
        self._stale = stale
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lock-releaser", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.release_finished()
            except (httpx.HTTPError, RuntimeError):
                continue  # the emulator is stopping, or a race with a writer: next round

    def release_finished(self) -> None:
        for node in self._api.list_items(NODES):
            meta = node["metadata"]
            value = (meta.get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
            if value and self._done(value):
                self._api.merge_patch(
                    f"{NODES}/{meta['name']}",
                    {"metadata": {"annotations": {NODE_LOCK_ANNOTATION: None}}},
                )

    def _done(self, value: str) -> bool:
        try:
            lock = parse_node_lock(value)
        except DomainError:
            return True
        if (datetime.now(UTC) - lock.taken_at).total_seconds() > self._stale:
            return True
        pod = self._api.get(f"{pods_path(lock.namespace or 'default')}/{lock.pod}")
        return pod is None or bool((pod.get("spec") or {}).get("nodeName"))

    @contextmanager
    def running(self) -> Iterator[LockReleaser]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(5)
