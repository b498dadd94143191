"""`ClusterPort` over a real Kubernetes API with the official client.

Reads answer from an in-memory cache that one informer thread per kind (nodes, pods,
ResourceQuotas) keeps up to date by list + watch; before a kind's first list has finished
they ask the API directly. Writes are JSON merge patches, a `pods/binding` subresource, and
core/v1 Events; the node lock follows HAMi (see `nodelock`).
"""

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.adapters.kubernetes.connection import ConnectionSettings, new_api_client
from vgpu.adapters.kubernetes.events import event_manifest
from vgpu.adapters.kubernetes.informer import Informer
from vgpu.adapters.kubernetes.nodelock import DEFAULT_CONFLICT_WAIT_S, NodeLocker
from vgpu.adapters.kubernetes.nodeupdate import update_node_annotations
from vgpu.adapters.kubernetes.resources import ResourceSpec, nodes, pods, quotas
from vgpu.domain.node import ClusterNode, node_from_manifest
from vgpu.domain.pod import Pod, pod_from_manifest
from vgpu.ports.cluster import (
    ClusterError,
    ClusterEvent,
    EventHandler,
    NodeUpdate,
    NotFound,
    Quota,
    Subscribers,
)

log = logging.getLogger(__name__)

T = TypeVar("T", ClusterNode, Pod, Quota)


class KubernetesCluster:
    """Implements ClusterPort against kube-apiserver.

    Call `start()` to begin watching and `wait_synced()` before trusting reads to be
    complete; `stop()` ends the watcher threads. Event handlers run on the watcher threads,
    one at a time (never concurrently), each kind's events in the API's order; a handler that
    raises is logged and does not disturb the others.

    `pod_field_selector` narrows the pods cached (a device plugin uses
    `spec.nodeName=<its node>`), `node_field_selector` the nodes (`metadata.name=<its node>`:
    then `list_nodes` knows that node only); `watch_nodes=False` skips nodes (then node reads
    ask the API), `watch_quotas=False` skips ResourceQuotas (then `list_quotas` asks the API).
    `component` is the source written into Events.
    `lock_conflict_wait_s` bounds how long `lock_node` waits for another pod's node lock.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        component: str = "vgpu",
        pod_field_selector: str = "",
        node_field_selector: str = "",
        watch_nodes: bool = True,
        watch_quotas: bool = True,
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
        owns_client: bool = False,
        lock_conflict_wait_s: float = DEFAULT_CONFLICT_WAIT_S,
    ) -> None:
        self._client = api_client
        self._owns_client = owns_client
        self._api = KubeApi(api_client, timeout=request_timeout_s)
        self._component = component
        self._clock = clock
        self._subscribers = Subscribers()
        self._delivery = threading.RLock()
        self._nodes = Informer(
            self._api, nodes(node_field_selector), self._deliver, watch_timeout_s=watch_timeout_s
        )
        self._pods = Informer(
            self._api, pods(pod_field_selector), self._deliver, watch_timeout_s=watch_timeout_s
        )
        self._quotas = (
            Informer(self._api, quotas(), self._deliver, watch_timeout_s=watch_timeout_s)
            if watch_quotas
            else None
        )
        self._sleep = sleep
        self._locker = NodeLocker(self._api, clock, sleep, conflict_wait_s=lock_conflict_wait_s)
        self._watch_nodes = watch_nodes

    @classmethod
    def connect(cls, settings: ConnectionSettings, **options: Any) -> "KubernetesCluster":
        """Build the client from `settings` (see ConnectionSettings); the cluster closes it."""
        return cls(new_api_client(settings), owns_client=True, **options)

    # lifecycle -------------------------------------------------------------------------------
    @property
    def _informers(self) -> list[Informer[Any]]:
        found: list[Informer[Any]] = [self._pods]
        if self._watch_nodes:
            found.insert(0, self._nodes)
        return found if self._quotas is None else [*found, self._quotas]

    def start(self) -> None:
        """Start one list + watch thread per kind; returns at once."""
        for informer in self._informers:
            informer.start()

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()
        if self._owns_client:
            self._api.close()

    @property
    def synced(self) -> bool:
        """Every kind has been listed once, so reads come from a complete cache."""
        return all(informer.synced for informer in self._informers)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until `synced` or `timeout` seconds; returns `synced`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self._informers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_synced(left):
                return False
        return True

    def informer_lists(self) -> dict[str, int]:
        """How many full lists each kind has done (1 after start; more after 410 Gone)."""
        return {informer.name: informer.lists for informer in self._informers}

    # reading ---------------------------------------------------------------------------------
    def list_nodes(self) -> list[ClusterNode]:
        if self._nodes.synced:
            return self._nodes.store.values()
        return self._live_list(self._nodes.spec)

    def get_node(self, name: str) -> ClusterNode | None:
        if self._nodes.synced:
            return self._nodes.store.get(name)
        return self._live_get(object_path("/api/v1/nodes", name), node_from_manifest)

    def list_pods(self, node_name: str | None = None) -> list[Pod]:
        """All pods, or those whose `spec.nodeName` is `node_name`."""
        if self._pods.synced:
            if node_name is None:
                return self._pods.store.values()
            return self._pods.store.select(lambda pod: pod.node_name == node_name)
        selector = "" if node_name is None else f"spec.nodeName={node_name}"
        if self._pods.spec.field_selector:
            selector = ",".join(s for s in (self._pods.spec.field_selector, selector) if s)
        return self._live_list(pods(selector))

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        if self._pods.synced:
            return self._pods.store.get(f"{namespace}/{name}")
        return self.read_pod(namespace, name)

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        """The pod as the API has it now (never the cache); None when it does not exist."""
        return self._live_get(object_path(namespaced("pods", namespace), name), pod_from_manifest)

    def list_quotas(self) -> list[Quota]:
        if self._quotas is not None and self._quotas.synced:
            return self._quotas.store.values()
        return self._live_list(quotas())

    def subscribe(self, handler: EventHandler) -> Callable[[], None]:
        """Call `handler` for every change from now on; returns a function that unsubscribes.

        Subscribed before `start()`, a handler also hears the first list as ADDED events.
        """
        return self._subscribers.add(handler)

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

        `resource_version` goes into the patch as `metadata.resourceVersion`, which the API
        server treats as a precondition: Conflict when the pod has changed since.
        """
        meta: dict[str, Any] = {"annotations": dict(annotations)}
        if labels:
            meta["labels"] = dict(labels)
        if resource_version:
            meta["resourceVersion"] = resource_version
        path = object_path(namespaced("pods", namespace), name)
        manifest = self._api.merge_patch(path, {"metadata": meta})
        try:
            pod = pod_from_manifest(manifest)
        except Exception as exc:
            raise ClusterError(
                f"pod {namespace}/{name} was patched but reads back malformed: {exc}"
            ) from exc
        self._pods.store.write_through(pod)
        return pod

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None]) -> None:
        manifest = self._api.merge_patch(
            object_path("/api/v1/nodes", name), {"metadata": {"annotations": dict(annotations)}}
        )
        self._nodes.store.write_through(node_from_manifest(manifest))

    def update_node_annotations(self, name: str, update: NodeUpdate) -> None:
        """Write what `update` makes of the node's annotations, with a resourceVersion
        precondition, reading the node again after a conflict (see `nodeupdate`)."""
        manifest = update_node_annotations(self._api, name, update, self._sleep)
        if manifest is not None:
            self._nodes.store.write_through(node_from_manifest(manifest))

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding to `node`; ClusterError says why it failed.

        kube-apiserver answers a Binding with a Status, not a Binding: success is the HTTP
        status (docs/protocol.md#api-server-behaviours).
        """
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._api.post(f"{object_path(namespaced('pods', namespace), name)}/binding", body)
        log.info("bound pod %s/%s to node %s", namespace, name, node)

    def record_event(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        """Create a core/v1 Event on the pod. Best effort: a failure is logged, not raised."""
        cached = self._pods.store.get(f"{namespace}/{pod}")
        manifest = event_manifest(
            namespace,
            pod,
            reason,
            message,
            warning=warning,
            component=self._component,
            now=self._clock(),
            pod_uid=cached.uid if cached is not None else "",
        )
        try:
            self._api.post(namespaced("events", namespace), manifest)
        except ClusterError as exc:
            log.warning("event %s on pod %s/%s not recorded: %s", reason, namespace, pod, exc)

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
        longer exists; waits up to `lock_conflict_wait_s` while another live pod holds it.
        Raises Conflict when that pod still holds it then, NotFound for a missing node.
        `also` adds annotations to the same patch.
        """
        manifest = self._locker.lock(node, namespace, pod, expiry, also)
        self._nodes.store.write_through(node_from_manifest(manifest))
        log.info("node %s locked for pod %s/%s", node, namespace, pod)

    def release_node_lock(self, node: str, namespace: str, pod: str) -> None:
        """Remove the lock if the pod owns it; harmless when it does not."""
        manifest = self._locker.release(node, namespace, pod)
        if manifest is not None:
            self._nodes.store.write_through(node_from_manifest(manifest))
            log.info("node %s unlocked by pod %s/%s", node, namespace, pod)

    # internals -------------------------------------------------------------------------------
    def _deliver(self, event: ClusterEvent) -> None:
        with self._delivery:
            for handler in self._subscribers.current():
                try:
                    handler(event)
                except Exception:
                    log.exception(
                        "event handler %r failed on %s %s", handler, event.action, event.kind
                    )

    def _live_list(self, spec: ResourceSpec[T]) -> list[T]:
        query = [("fieldSelector", spec.field_selector)] if spec.field_selector else []
        found: list[T] = []
        for raw in self._api.get(spec.path, query).get("items") or []:
            try:
                found.append(spec.convert(raw))
            except Exception as exc:
                log.warning("skipping malformed %s: %s", spec.kind.value, exc)
        return found

    def _live_get(self, path: str, convert: Callable[[Mapping[str, Any]], T]) -> T | None:
        try:
            manifest = self._api.get(path)
        except NotFound:
            return None
        try:
            return convert(manifest)
        except Exception as exc:  # as in the cache: a malformed object is skipped
            log.warning("skipping malformed %s: %s", path, exc)
            return None
