"""An in-memory Kubernetes API: nodes, pods and quotas with resourceVersions, events, a lock."""

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from vgpu.domain.errors import DomainError
from vgpu.domain.node import ClusterNode
from vgpu.domain.nodelock import NodeLock, lock_releasable, parse_node_lock
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION
from vgpu.ports.cluster import (
    Action,
    ClusterError,
    ClusterEvent,
    Conflict,
    EventHandler,
    Kind,
    NodeUpdate,
    NotFound,
    Quota,
    Subscribers,
)


class FakeCluster:
    """Implements ClusterPort in memory. Thread-safe; handlers run on the writer's thread."""

    def __init__(
        self,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        lock_conflict_wait_s: float = 0.0,
    ) -> None:
        self._lock = threading.RLock()
        self._clock = clock
        # lock_node waits this long (real time) for another pod's node lock; 0: refuse at once
        self._lock_conflict_wait_s = lock_conflict_wait_s
        self._node_lock_released = threading.Condition(self._lock)
        self._version = 0
        self._nodes: dict[str, ClusterNode] = {}
        self._pods: dict[tuple[str, str], Pod] = {}
        self._quotas: dict[tuple[str, str], Quota] = {}
        self._subscribers = Subscribers()
        self.events: list[tuple[str, str, str, str, bool]] = []  # ns, pod, reason, message, warning
        self.bindings: list[tuple[str, str, str]] = []  # ns, pod, node
        self.list_pods_error = ""  # when set, list_pods fails with it (an unreachable API)

    # test set-up -----------------------------------------------------------------------------
    def put_node(self, node: ClusterNode) -> ClusterNode:
        with self._lock:
            action = Action.MODIFIED if node.name in self._nodes else Action.ADDED
            stored = replace(node, resource_version=self._next_version())
            self._nodes[node.name] = stored
        self._emit(Kind.NODE, action, stored)
        return stored

    def put_pod(self, pod: Pod) -> Pod:
        with self._lock:
            action, stored = self._store_pod(pod)
        self._emit(Kind.POD, action, stored)
        return stored

    def delete_pod(self, namespace: str, name: str) -> None:
        with self._lock:
            pod = self._pods.pop((namespace, name), None)
        if pod is not None:
            self._emit(Kind.POD, Action.DELETED, pod)

    def delete_node(self, name: str) -> None:
        with self._lock:
            node = self._nodes.pop(name, None)
        if node is not None:
            self._emit(Kind.NODE, Action.DELETED, node)

    def put_quota(self, quota: Quota) -> None:
        with self._lock:
            key = (quota.namespace, quota.name)
            action = Action.MODIFIED if key in self._quotas else Action.ADDED
            self._quotas[key] = quota
        self._emit(Kind.QUOTA, action, quota)

    def delete_quota(self, namespace: str, name: str) -> None:
        with self._lock:
            quota = self._quotas.pop((namespace, name), None)
        if quota is not None:
            self._emit(Kind.QUOTA, Action.DELETED, quota)

    # ClusterPort: reading --------------------------------------------------------------------
    def list_nodes(self) -> list[ClusterNode]:
        with self._lock:
            return list(self._nodes.values())

    def get_node(self, name: str) -> ClusterNode | None:
        with self._lock:
            return self._nodes.get(name)

    def list_pods(self, node_name: str | None = None) -> list[Pod]:
        if self.list_pods_error:
            raise ClusterError(self.list_pods_error)
        with self._lock:
            return [p for p in self._pods.values() if node_name is None or p.node_name == node_name]

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        with self._lock:
            return self._pods.get((namespace, name))

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        return self.get_pod(namespace, name)

    def list_quotas(self) -> list[Quota]:
        with self._lock:
            return list(self._quotas.values())

    def subscribe(self, handler: EventHandler) -> Callable[[], None]:
        return self._subscribers.add(handler)

    # ClusterPort: writing --------------------------------------------------------------------
    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> Pod:
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                raise NotFound(f"pod {namespace}/{name} not found")
            if resource_version and resource_version != pod.resource_version:
                raise Conflict(
                    f"pod {namespace}/{name} has resourceVersion {pod.resource_version}, "
                    f"the patch expects {resource_version}"
                )
            updated = replace(
                pod,
                annotations=_merge(pod.annotations, annotations),
                labels=_merge(pod.labels, labels or {}),
            )
            action, stored = self._store_pod(updated)  # the check and the write are one step
        self._emit(Kind.POD, action, stored)
        return stored

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None]) -> None:
        with self._lock:
            node = self._nodes.get(name)
            if node is None:
                raise NotFound(f"node {name} not found")
            self.put_node(replace(node, annotations=_merge(node.annotations, annotations)))

    def update_node_annotations(self, name: str, update: NodeUpdate) -> None:
        with self._lock:  # the read and the write are one step: nothing can change between
            node = self._nodes.get(name)
            if node is None:
                raise NotFound(f"node {name} not found")
            changes = update(node.annotations)
            if changes:
                self.patch_node_annotations(name, changes)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                raise NotFound(f"pod {namespace}/{name} not found")
            if uid and pod.uid and uid != pod.uid:
                raise Conflict(f"pod {namespace}/{name} has uid {pod.uid}, not {uid}")
            if pod.node_name:
                raise Conflict(f"pod {namespace}/{name} is already bound to {pod.node_name}")
            self.bindings.append((namespace, name, node))
            self.put_pod(replace(pod, node_name=node))

    def record_event(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        with self._lock:
            self.events.append((namespace, pod, reason, message, warning))

    def lock_node(
        self,
        node: str,
        namespace: str,
        pod: str,
        expiry: timedelta,
        also: NodeUpdate | None = None,
    ) -> None:
        deadline = time.monotonic() + self._lock_conflict_wait_s
        with self._lock:
            while (holder := self._lock_holder(node, namespace, pod, expiry)) is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Conflict(f"node {node} is locked by {holder.namespace}/{holder.pod}")
                # woken by a release; the slice catches locks that expire or lose their pod
                self._node_lock_released.wait(min(left, 0.1))
            current = self._nodes[node]
            extra = dict(also(current.annotations)) if also is not None else {}
            value = NodeLock(self._clock(), namespace, pod).encode()
            self.patch_node_annotations(node, {**extra, NODE_LOCK_ANNOTATION: value})

    def release_node_lock(self, node: str, namespace: str, pod: str) -> None:
        with self._lock:
            current = self._nodes.get(node)
            held = None if current is None else current.annotations.get(NODE_LOCK_ANNOTATION)
            if held is None or not lock_releasable(held, namespace, pod):
                return
            self.patch_node_annotations(node, {NODE_LOCK_ANNOTATION: None})
            self._node_lock_released.notify_all()

    def _lock_holder(
        self, node: str, namespace: str, pod: str, expiry: timedelta
    ) -> NodeLock | None:
        """The lock that keeps `namespace/pod` from taking `node`, or None when it may."""
        current = self._nodes.get(node)
        if current is None:
            raise NotFound(f"node {node} not found")
        lock = _readable_lock(current.annotations.get(NODE_LOCK_ANNOTATION))
        if lock is None:
            return None
        now = self._clock()
        owner_alive = (lock.namespace, lock.pod) in self._pods
        may_take = (
            lock.owned_by(namespace, pod)
            or lock.expired(now, expiry)
            or lock.from_the_future(now)
            or (lock.pod and not owner_alive)
        )
        return None if may_take else lock

    # internals -------------------------------------------------------------------------------
    def _store_pod(self, pod: Pod) -> tuple[Action, Pod]:
        key = (pod.namespace, pod.name)
        action = Action.MODIFIED if key in self._pods else Action.ADDED
        stored = replace(pod, resource_version=self._next_version())
        self._pods[key] = stored
        return action, stored

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _emit(self, kind: Kind, action: Action, obj: ClusterNode | Pod | Quota) -> None:
        for handler in self._subscribers.current():
            handler(ClusterEvent(kind, action, obj))


def _readable_lock(value: str | None) -> NodeLock | None:
    """The lock, or None when absent or unreadable (an unreadable lock is taken over)."""
    if value is None:
        return None
    try:
        return parse_node_lock(value)
    except DomainError:
        return None


def _merge(current: Mapping[str, str], patch: Mapping[str, str | None]) -> Mapping[str, str]:
    if not patch:  # the pod's own mapping is never changed in place: share it
        return current
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
