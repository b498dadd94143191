"""Events about pods, as the scheduler's use cases record them.

`PodEvents` is what the service needs; `ClusterPodEvents` writes each one at once through the
ClusterPort (a bounded background queue can stand in with the same method). Only the leader
writes: a follower's events are dropped.
"""

import logging
from collections.abc import Callable
from typing import Protocol

from vgpu.ports.cluster import ClusterPort

log = logging.getLogger(__name__)

EVENT_MESSAGE_LIMIT = 1000


class PodEvents(Protocol):
    def record(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None: ...


class ClusterPodEvents:
    """Records events synchronously; never raises (an event is a courtesy)."""

    def __init__(self, cluster: ClusterPort, is_leader: Callable[[], bool]) -> None:
        self._cluster = cluster
        self._is_leader = is_leader

    def record(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        if not self._is_leader():
            return
        if len(message) > EVENT_MESSAGE_LIMIT:
            message = message[: EVENT_MESSAGE_LIMIT - 3] + "..."
        try:
            self._cluster.record_event(namespace, pod, reason, message, warning=warning)
        except Exception as exc:
            log.warning("event %s for pod %s/%s not recorded: %s", reason, namespace, pod, exc)
