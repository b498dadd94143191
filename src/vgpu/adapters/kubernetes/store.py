"""The informer's cache of one kind of object, and how a list or a watch event changes it."""

import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Pod
from vgpu.ports.cluster import Action, Quota

T = TypeVar("T", ClusterNode, Pod, Quota)


def object_key(obj: ClusterNode | Pod | Quota) -> str:
    """`name` for nodes, `namespace/name` for pods and quotas."""
    if isinstance(obj, ClusterNode):
        return obj.name
    return f"{obj.namespace}/{obj.name}"


def resource_version(obj: ClusterNode | Pod | Quota) -> str:
    return "" if isinstance(obj, Quota) else obj.resource_version


def is_newer(candidate: str, current: str) -> bool:
    """Whether `candidate` may replace `current`.

    resourceVersions are opaque to clients, but kube-apiserver's are etcd revisions (integers);
    comparing them keeps a slow write answer from overwriting a newer watched state. Anything
    that is not two integers counts as newer.
    """
    if candidate.isdigit() and current.isdigit():
        return int(candidate) > int(current)
    return True


class Store(Generic[T]):
    """Thread-safe map of key -> object; `replace` and `apply` say which events they imply."""

    def __init__(self, key: Callable[[T], str] = object_key) -> None:
        self._key: Callable[[T], str] = key
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._items.get(key)

    def values(self) -> list[T]:
        with self._lock:
            return list(self._items.values())

    def select(self, keep: Callable[[T], bool]) -> list[T]:
        with self._lock:
            return [item for item in self._items.values() if keep(item)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def replace(self, items: Iterable[T], unreadable: Iterable[str] = ()) -> list[tuple[Action, T]]:
        """Swap in a fresh list; returns the ADDED/MODIFIED/DELETED events it amounts to.

        Keys in `unreadable` (listed but malformed) keep their last good version.
        """
        fresh = {self._key(item): item for item in items}
        keep = set(unreadable)
        events: list[tuple[Action, T]] = []
        with self._lock:
            for key, item in fresh.items():
                old = self._items.get(key)
                if old is None:
                    events.append((Action.ADDED, item))
                elif old != item:
                    events.append((Action.MODIFIED, item))
            for key, old in self._items.items():
                if key not in fresh and key not in keep:
                    events.append((Action.DELETED, old))
                elif key in keep:
                    fresh[key] = old
            self._items = fresh
        return events

    def apply(self, action: Action, item: T) -> Action | None:
        """Record a watch event; returns the change it really is, or None for no change.

        A watch restarted without a resourceVersion replays every object as ADDED: an object
        already cached unchanged is no change, a changed one is MODIFIED. A MODIFIED object
        the cache lacks is ADDED; a DELETED one it lacks is no change. MODIFIED always counts,
        even when `write_through` already cached that version.
        """
        key = self._key(item)
        with self._lock:
            old = self._items.get(key)
            if action is Action.DELETED:
                if old is None:
                    return None
                del self._items[key]
                return Action.DELETED
            self._items[key] = item
            if old is None:
                return Action.ADDED
            if action is Action.ADDED and old == item:
                return None
            return Action.MODIFIED

    def discard(self, key: str) -> T | None:
        """Forget `key`; returns what was cached."""
        with self._lock:
            return self._items.pop(key, None)

    def write_through(self, item: T) -> None:
        """Record our own write's answer over a cached older version.

        An object the cache lacks is left to the watch, so that a write racing a deletion
        cannot bring a deleted object back.
        """
        key = self._key(item)
        with self._lock:
            current = self._items.get(key)
            if current is not None and is_newer(resource_version(item), resource_version(current)):
                self._items[key] = item
