"""List + watch of one kind into a cache, on its own thread (the informer pattern).

The thread lists (page by page), remembers the list's resourceVersion, watches from it, and
resumes each new watch from the last resourceVersion it saw (events and bookmarks). A watch
answered with 410 Gone leads to a fresh list, whose difference to the cache becomes events.
Connection errors are retried with exponential backoff. An object that does not convert is
logged by name and skipped; it never stops the thread.
"""

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import urllib3

from vgpu.adapters.kubernetes.api import KubeApi
from vgpu.adapters.kubernetes.backoff import Backoff
from vgpu.adapters.kubernetes.resources import ResourceSpec, manifest_key
from vgpu.adapters.kubernetes.store import Store
from vgpu.adapters.kubernetes.watch import WatchEvent, WatchGone, iter_lines, parse_event
from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Pod
from vgpu.ports.cluster import Action, ClusterEvent, Quota

T = TypeVar("T", ClusterNode, Pod, Quota)

log = logging.getLogger(__name__)

PAGE_SIZE = 500
# a watch shorter than this that brought nothing is treated like a failure (backoff), so a
# server that closes watches at once is not hammered
SHORT_WATCH_S = 1.0


class Informer(Generic[T]):
    """Keeps `store` equal to the API's objects of one kind; `emit` hears every change."""

    def __init__(
        self,
        api: KubeApi,
        spec: ResourceSpec[T],
        emit: Callable[[ClusterEvent], None],
        *,
        watch_timeout_s: int = 300,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec: ResourceSpec[T] = spec
        self.store: Store[T] = Store()
        self._api = api
        self._emit = emit
        self._watch_timeout_s = watch_timeout_s
        self._backoff = backoff or Backoff(initial=0.2, cap=30.0)
        self._clock = clock
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._thread: threading.Thread | None = None
        self.resource_version = ""
        self.lists = 0  # how many full lists were done; a relist after 410 Gone adds one

    @property
    def name(self) -> str:
        return f"{self.spec.kind.value}s"

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"vgpu-informer-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread: interrupts a watch that is waiting for events."""
        self._stopping.set()
        with self._lock:
            response = self._response
        if response is not None:
            _interrupt(response)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s informer did not stop within %.1fs", self.name, timeout)
            self._thread = None

    # the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        resume: str | None = None  # None: list first
        while not self._stopping.is_set():
            try:
                if resume is None:
                    resume = self._relist()
                resume = self._watch(resume)
            except WatchGone as exc:
                log.info(
                    "%s: watch from resourceVersion %s expired (%s); relisting",
                    self.name,
                    resume,
                    exc,
                )
                resume = None
            except Exception as exc:
                if self._stopping.is_set():
                    break
                self._pause(f"list/watch failed: {exc}")

    def _pause(self, why: str) -> None:
        delay = self._backoff.next_delay()
        log.warning("%s: %s; retrying in %.1fs", self.name, why, delay)
        self._stopping.wait(delay)

    def _relist(self) -> str:
        items: list[Mapping[str, Any]] = []
        version, token = "", ""
        while True:
            query = [("limit", str(PAGE_SIZE)), *self._selector()]
            if token:
                query.append(("continue", token))
            page = self._api.get(self.spec.path, query)
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            items.extend(item for item in page.get("items") or [] if isinstance(item, Mapping))
            token = str(meta.get("continue") or "")
            if not token:
                break
        good: list[T] = []
        unreadable: list[str] = []
        for raw in items:
            obj = self._convert(raw)
            if obj is None:
                unreadable.append(manifest_key(self.spec.kind, raw))
            else:
                good.append(obj)
        changes = self.store.replace(good, unreadable)
        self.lists += 1
        self.resource_version = version
        self._backoff.reset()
        log.info(
            "%s: listed %d at resourceVersion %s (%d changes)",
            self.name,
            len(good),
            version or "?",
            len(changes),
        )
        for action, obj in changes:
            self._emit(ClusterEvent(self.spec.kind, action, obj))
        self._synced.set()
        return version

    def _watch(self, version: str) -> str:
        timeout = self._watch_timeout_s + random.randint(0, max(self._watch_timeout_s // 5, 1))
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
            *self._selector(),
        ]
        if version:
            query.append(("resourceVersion", version))
        response = self._api.open_stream(self.spec.path, query, read_timeout=timeout + 30)
        with self._lock:
            self._response = response
        started, delivered = self._clock(), 0
        try:
            if self._stopping.is_set():
                return version
            for line in iter_lines(response.stream(None)):
                try:
                    event = parse_event(line)
                except ValueError as exc:
                    log.warning("%s: skipping a watch line: %s", self.name, exc)
                    continue
                event.raise_if_error()
                version = self._apply(event) or version
                delivered += 1
        finally:
            with self._lock:
                self._response = None
            # a stream left mid-way must not go back to the pool with unread bytes
            response.close()
            response.release_conn()
        if delivered == 0 and self._clock() - started < SHORT_WATCH_S:
            self._pause("the watch ended at once")
        else:
            self._backoff.reset()
        return version

    def _apply(self, event: WatchEvent) -> str:
        self.resource_version = event.resource_version or self.resource_version
        if event.type == "BOOKMARK":
            return event.resource_version
        obj = self._convert(event.object)
        change: tuple[Action, T] | None = None
        if obj is not None:
            action = self.store.apply(Action(event.type), obj)
            change = None if action is None else (action, obj)
        elif event.type == "DELETED":
            gone = self.store.discard(manifest_key(self.spec.kind, event.object))
            change = None if gone is None else (Action.DELETED, gone)
        if change is not None:
            self._emit(ClusterEvent(self.spec.kind, change[0], change[1]))
        return event.resource_version

    def _convert(self, raw: Mapping[str, Any]) -> T | None:
        try:
            obj = self.spec.convert(raw)
        except Exception as exc:  # any malformed field; the object is skipped, not the watch
            log.warning(
                "%s: skipping malformed %s %s: %s",
                self.name,
                self.spec.kind.value,
                manifest_key(self.spec.kind, raw),
                exc,
            )
            return None
        if not obj.name:
            log.warning("%s: skipping a %s without a name", self.name, self.spec.kind.value)
            return None
        return obj

    def _selector(self) -> list[tuple[str, str]]:
        return [("fieldSelector", self.spec.field_selector)] if self.spec.field_selector else []


def _interrupt(response: urllib3.BaseHTTPResponse) -> None:
    """Unblock a thread reading `response` by shutting the socket's read side."""
    try:
        shutdown = getattr(response, "shutdown", None)
        if shutdown is not None:
            shutdown()
        else:
            response.close()
    except (OSError, ValueError, RuntimeError) as exc:
        log.debug("interrupting a watch: %s", exc)
