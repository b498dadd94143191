"""A started KubernetesCluster on the `k8s_api` emulator, and a recorder of its events."""

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.e2e.k8s_emulator import RunningApiServer
from vgpu.adapters.kubernetes import ConnectionSettings, KubernetesCluster
from vgpu.ports.cluster import ClusterEvent


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` until it holds; False when `timeout` passes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class Recorder:
    """Collects ClusterEvents as `(kind, action, name)` from the watcher threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[ClusterEvent] = []

    def __call__(self, event: ClusterEvent) -> None:
        with self._lock:
            self.events.append(event)

    def seen(self) -> list[tuple[str, str, str]]:
        with self._lock:
            return [(e.kind.value, e.action.value, e.obj.name) for e in self.events]

    def wait_for(self, *expected: tuple[str, str, str]) -> bool:
        return wait_until(lambda: all(item in self.seen() for item in expected))


@pytest.fixture()
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture()
def connect_to() -> Iterator[Callable[..., KubernetesCluster]]:
    """Build (not start) adapters for an API URL; all are stopped after the test."""
    made: list[KubernetesCluster] = []

    def build(url: str, **options: object) -> KubernetesCluster:
        cluster = KubernetesCluster.connect(ConnectionSettings(host=url), **options)
        made.append(cluster)
        return cluster

    yield build
    for cluster in made:
        cluster.stop()


@pytest.fixture()
def connect(
    k8s_api: RunningApiServer, connect_to: Callable[..., KubernetesCluster]
) -> Callable[..., KubernetesCluster]:
    """Build (not start) adapters on the `k8s_api` emulator."""
    return lambda **options: connect_to(k8s_api.url, **options)


@pytest.fixture()
def free_port() -> int:
    """A loopback port nothing listens on (the system just handed it out)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture()
def cluster(connect: Callable[..., KubernetesCluster], recorder: Recorder) -> KubernetesCluster:
    """A started adapter whose first list has finished, with `recorder` subscribed."""
    started = connect(component="vgpu-test")
    started.subscribe(recorder)
    started.start()
    assert started.wait_synced(10)
    return started
