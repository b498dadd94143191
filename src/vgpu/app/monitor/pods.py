"""Which pod and container a cache directory belongs to, and which directories are stale.

Metrics follow HAMi's monitor: only pods labelled `hami.io/vgpu-node=<this node>` count, and a
directory `<pod uid>_<container>` belongs to the pod with that UID if it has an app container
(not an init container) of that name. Clean-up uses every pod bound to the node: a directory
whose pod UID none of them has is removed once its mtime is older than the grace period, which
covers pods created after the last read of the API.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.domain.pod import Pod
from vgpu.domain.vendor import ASSIGNED_NODE_LABEL
from vgpu.ports.accounting import CacheDir


@dataclass(frozen=True, slots=True)
class Owner:
    namespace: str
    pod: str
    container: str


class Owners:
    """The GPU pods of one node, by UID."""

    def __init__(self, pods: Iterable[Pod], node: str) -> None:
        self._pods = {
            pod.uid: pod for pod in pods if pod.uid and pod.labels.get(ASSIGNED_NODE_LABEL) == node
        }

    @property
    def pods(self) -> list[Pod]:
        return list(self._pods.values())

    def of(self, entry: CacheDir) -> Owner | None:
        pod = self._pods.get(entry.pod_uid)
        if pod is None:
            return None
        if not any(c.name == entry.container and not c.is_init for c in pod.containers):
            return None
        return Owner(pod.namespace, pod.name, entry.container)


def stale(
    dirs: Iterable[CacheDir], pods_on_node: Iterable[Pod], now: float, grace: float
) -> list[CacheDir]:
    """The directories of pods that no longer exist and are older than `grace` seconds."""
    known = {pod.uid for pod in pods_on_node}
    return [d for d in dirs if d.pod_uid not in known and d.modified < now - grace]
