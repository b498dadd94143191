"""The Kubernetes API as the scheduler and the device plugin use it."""

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Protocol

from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Pod


class ClusterError(RuntimeError):
    """The cluster refused or failed a request; the message says which and why."""


class Rejected(ClusterError):
    """The API answered with a clear refusal (HTTP 4xx): the request was not applied.

    Any other ClusterError (timeout, reset connection, HTTP 5xx) is *ambiguous*: the write may
    or may not have been applied, and only reading the object again tells.
    """


class NotFound(Rejected):
    pass


class Conflict(Rejected):
    """A precondition (resourceVersion) failed, or a lock is held by someone else."""


class Kind(StrEnum):
    NODE = "node"
    POD = "pod"
    QUOTA = "quota"


class Action(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Quota:
    """A ResourceQuota's name, namespace and `spec.hard`."""

    namespace: str
    name: str
    hard: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    kind: Kind
    action: Action
    obj: ClusterNode | Pod | Quota


EventHandler = Callable[[ClusterEvent], None]

NodeUpdate = Callable[[Mapping[str, str]], Mapping[str, str | None]]
"""Given a node's annotations as last read, the annotations to write with them (None deletes a
key; empty: nothing to write). It may be called once per try of a write that conflicts."""


class Subscribers:
    """The handlers `ClusterPort.subscribe` has taken, for any implementation. Thread-safe.

    `add` gives back the function that unsubscribes, as the protocol promises; `current` is a
    copy to deliver an event to, so a handler may unsubscribe while it is being called. How an
    event is delivered (which thread, what a failing handler does) stays the implementation's.
    """

    def __init__(self) -> None:
        self._handlers: list[EventHandler] = []
        self._lock = threading.Lock()

    def add(self, handler: EventHandler) -> Callable[[], None]:
        """Register `handler`; the returned function removes it (calling it twice is harmless)."""
        with self._lock:
            self._handlers.append(handler)

        def unsubscribe() -> None:
            with self._lock:
                if handler in self._handlers:
                    self._handlers.remove(handler)

        return unsubscribe

    def current(self) -> list[EventHandler]:
        """The handlers registered now, in the order they came."""
        with self._lock:
            return list(self._handlers)


class ClusterPort(Protocol):
    # reading ---------------------------------------------------------------------------------
    def list_nodes(self) -> list[ClusterNode]: ...

    def get_node(self, name: str) -> ClusterNode | None: ...

    def list_pods(self, node_name: str | None = None) -> list[Pod]:
        """All pods, or those whose `spec.nodeName` is `node_name`."""
        ...

    def get_pod(self, namespace: str, name: str) -> Pod | None: ...

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        """The pod as the API has it now, never from a cache (to settle an ambiguous write)."""
        ...

    def list_quotas(self) -> list[Quota]: ...

    def subscribe(self, handler: EventHandler) -> Callable[[], None]:
        """Call `handler` for every change from now on; returns a function that unsubscribes."""
        ...

    # writing ---------------------------------------------------------------------------------
    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> Pod:
        """JSON merge patch of metadata annotations (None deletes a key); NotFound if gone.

        With `resource_version`, the patch applies only to that version of the pod, else
        Conflict (so a write based on a superseded read fails instead of winning).
        """
        ...

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None]) -> None: ...

    def update_node_annotations(self, name: str, update: NodeUpdate) -> None:
        """Read the node, write what `update` makes of its annotations with a resourceVersion
        precondition, and read and try again when the node changed meanwhile (Conflict after
        a few tries); NotFound if the node is gone."""
        ...

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding to `node`; ClusterError says why it failed."""
        ...

    def record_event(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None: ...

    def lock_node(
        self,
        node: str,
        namespace: str,
        pod: str,
        expiry: timedelta,
        also: NodeUpdate | None = None,
    ) -> None:
        """Take `hami.io/mutex.lock` on the node for the pod (HAMi-compatible value).

        Succeeds when the lock is free, already the pod's, expired, or held by a pod that no
        longer exists. Raises Conflict when another live pod holds it. `also` adds annotations
        to the same write (computed from the node's annotations as read for it).
        """
        ...

    def release_node_lock(self, node: str, namespace: str, pod: str) -> None:
        """Remove the lock if the pod owns it; harmless when it does not."""
        ...
