"""A Kubernetes API server emulator on a real loopback port, for e2e tests.

It is kmock's `KubernetesEmulator` (PyPI `kmock`: objects kept in memory and served over real
HTTP for list, get, create, merge/JSON patch and delete) plus what kmock lacks and vgpu needs:

- resourceVersions: every write stamps `metadata.resourceVersion` from one counter, as etcd
  does; creates also get a `uid` and `creationTimestamp`; a list answers with the current one;
- optimistic concurrency: a PATCH or PUT whose body carries a stale
  `metadata.resourceVersion` gets 409 Conflict (the node lock and leader election rely on it);
- watches that start from a resourceVersion and replay the changes since then, ERROR 410 Gone
  when that version is older than the last `compact()`, `timeoutSeconds`, and the field
  selectors `spec.nodeName`, `metadata.name`, `metadata.namespace`, `status.phase`;
- PUT (replace), which Lease-based leader election uses;
- `POST .../pods/<name>/binding`, answered like kube-apiserver with a `Status` (201), 409 when
  the pod is already bound or the Binding's uid is not the pod's;
- slow answers for fault injection: `delay(method, path_part, seconds)` holds back the answer
  of matching requests *after* they took effect (a write that commits but times out, or a
  hanging Lease call) until the time passes or `end_delays()`;
- `resource.k8s.io/v1` ResourceSlices, ResourceClaims, ResourceClaimTemplates and
  DeviceClasses (kmock serves any group), with every ResourceSlice and ResourceClaimTemplate
  written checked against the API's own schema of Kubernetes 1.34 and 1.36
  (kubernetes-validate, strict: unknown fields too) and refused with 422 Invalid, as
  kube-apiserver refuses it, when it does not validate;
- TokenReview and SubjectAccessReview (for non-resource URLs), answered from the tokens and the
  permissions a test gives (`accept_token`, `allow`) and kept nowhere; `reviews_down` makes both
  answer 503, as an API server that cannot reach its authenticator would.

Tests normally use the `k8s_api` fixture of `tests/e2e/conftest.py`, which starts a
`RunningApiServer` (this module) on 127.0.0.1 and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import httpx
import kmock
import kubernetes_validate
from kmock._internal import rendering
from kmock._internal.k8s import KubernetesError

MERGE_PATCH = "application/merge-patch+json"
# (group, plural) -> the Kubernetes versions whose schema a written object must pass
SCHEMA_CHECKED = {
    ("resource.k8s.io", "resourceslices"): ("1.34", "1.36"),
    ("resource.k8s.io", "resourceclaimtemplates"): ("1.34", "1.36"),
}
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the watch history."""

    version: int
    resource: Any  # kmock.resource
    type: str
    namespace: str | None
    name: Any
    object: dict[str, Any]


@attrs.define(kw_only=True)
class ApiServerEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with resourceVersions, preconditions, watch history, PUT and binding."""

    _version: int = attrs.field(default=0, init=False)
    _floor: int = attrs.field(default=0, init=False)
    _history: list[Change] = attrs.field(factory=list, init=False)
    _changed: asyncio.Condition = attrs.field(factory=asyncio.Condition, init=False)
    _writes: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    _watch_epoch: int = attrs.field(default=0, init=False)
    _held: bool = attrs.field(default=False, init=False)
    _delays: list[tuple[str, str, float]] = attrs.field(factory=list, init=False)
    _undelayed: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    # None keeps every request (`list(emulator)`); a number keeps only that many recent ones.
    # kmock matches each request against the whole log, so long runs (soaks) set a bound.
    request_log_limit: int | None = attrs.field(default=None, init=False)
    # token -> TokenReview status.user; (username, verb, path) a SubjectAccessReview allows
    tokens: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False)
    allowed: set[tuple[str, str, str]] = attrs.field(factory=set, init=False)
    reviews_down: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # fallbacks, so that a test's own reactions (kmock DSL) still come first
        self.fallback[self._is_replace] << self._replace
        self.fallback[self._is_binding] << self._bind
        # before kmock's own create, which would store the review as an object
        (self.fallback ** 1)[self._is_review] << self._review

    # public, called on the server's loop --------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._version

    async def compact(self) -> None:
        """Forget history: watches from older resourceVersions get 410 Gone from now on."""
        self._floor = self._version

    async def drop_watches(self) -> None:
        """End every open watch stream (clients must reconnect)."""
        self._watch_epoch += 1
        async with self._changed:
            self._changed.notify_all()

    async def hold_watches(self) -> None:
        """Stop delivering changes to watches (as if the network dropped them)."""
        self._held = True

    async def expire_history(self) -> None:
        """Compact, end every watch and deliver again: watchers resuming get 410 Gone."""
        await self.compact()
        await self.drop_watches()
        self._held = False

    async def delay(self, method: str, path_part: str, seconds: float) -> None:
        """Hold back answers to `method` requests whose path contains `path_part`."""
        self._delays.append((method.upper(), path_part, seconds))
        self._undelayed.clear()

    async def end_delays(self) -> None:
        """Answer every held-back request now, and hold back nothing from now on."""
        self._delays.clear()
        self._undelayed.set()

    # request handling ---------------------------------------------------------------------
    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        limit = self.request_log_limit
        if limit is not None and len(self._requests) > 2 * limit:
            del self._requests[:-limit]
        response = await self._handle_now(request)
        method, path = str(request.method.value).upper(), request.url.path
        for wanted, part, seconds in list(self._delays):
            if wanted == method and part in path:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._undelayed.wait(), seconds)
        return response

    async def _handle_now(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        resource, method = request.resource, str(request.method.value).upper()
        if self._is_review(request) and isinstance(request.data, dict):
            # kmock keeps every create as an object; a review has no name, so each gets one
            request.data.setdefault("metadata", {})["name"] = f"review-{uuid.uuid4()}"
            return await super()._handle(request)
        if resource is None or method in ("GET", "HEAD", "OPTIONS"):
            return await super()._handle(request)
        async with self._writes:  # a precondition check and its write are one step
            key, version = self._prepare(request)
            response = await super()._handle(request)
            if key is not None and 200 <= response.status < 300:
                await self._record_write(key, version, request.action)
            return response

    def _prepare(self, request: rendering.Request) -> tuple[Any, int]:
        """Check preconditions and stamp the next resourceVersion into the write.

        Returns the object's key (None when this write needs no history entry) and version.
        """
        version = self._version + 1
        resource: Any = request.resource
        if request.action == kmock.action.CREATE:
            _check_schema(resource, request.data)
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{secrets.token_hex(3)}"
            if request.namespace:
                meta.setdefault("namespace", request.namespace)
            meta["resourceVersion"] = str(version)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            return (resource, request.namespace or meta.get("namespace"), meta.get("name")), version
        if request.name is None:
            return None, version
        key = (resource, request.namespace, request.name)
        current = self._current(key)
        if request.action == kmock.action.UPDATE and current is not None:
            data = request.data
            if isinstance(data, dict):
                wanted = (data.get("metadata") or {}).get("resourceVersion")
                self._check_version(key, current, wanted)
                data.setdefault("metadata", {})["resourceVersion"] = str(version)
            elif isinstance(data, list):
                data.append(
                    {"op": "add", "path": "/metadata/resourceVersion", "value": str(version)}
                )
            return key, version
        if request.action == kmock.action.DELETE and current is not None:
            self._objects[key].patch({"metadata": {"resourceVersion": str(version)}})
            return key, version
        return None, version

    async def _record_write(self, key: Any, version: int, action: Any) -> None:
        resource, namespace, name = key
        obj = self._objects[key]
        if obj.deleted:
            kind, raw = "DELETED", obj.last.raw
        else:
            kind = "ADDED" if action == kmock.action.CREATE else "MODIFIED"
            raw = obj.raw
        await self._append(Change(version, resource, kind, namespace, name, raw))

    async def _append(self, change: Change) -> None:
        self._version = change.version
        self._history.append(change)
        async with self._changed:
            self._changed.notify_all()

    def _current(self, key: Any) -> dict[str, Any] | None:
        if key not in self._objects or self._objects[key].deleted:
            return None
        raw: dict[str, Any] = self._objects[key].raw
        return raw

    def _check_version(self, key: Any, current: Mapping[str, Any], wanted: Any) -> None:
        have = (current.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and str(wanted) != str(have):
            resource, _, name = key
            raise KubernetesError(
                status=409,
                reason="Conflict",
                message=f'Operation cannot be fulfilled on {resource.plural} "{name}": the '
                "object has been modified; please apply your changes to the latest version "
                "and try again",
                details={"name": name, "kind": resource.plural},
            )

    @staticmethod
    def _is_replace(request: rendering.Request) -> bool:
        return (
            str(request.method.value).upper() == "PUT"
            and request.name is not None
            and request.subresource is None
        )

    @staticmethod
    def _is_review(request: rendering.Request) -> bool:
        method = str(request.method.value).upper()
        return method == "POST" and request.url.path in (TOKEN_REVIEWS, ACCESS_REVIEWS)

    async def _review(self, request: rendering.Request) -> rendering.Payload:
        if self.reviews_down:
            raise KubernetesError(
                status=503,
                reason="ServiceUnavailable",
                message="the authenticator is unreachable",
                details={},
            )
        review = request.data if isinstance(request.data, dict) else {}
        spec = review.get("spec") or {}
        if request.url.path == TOKEN_REVIEWS:
            user = self.tokens.get(str(spec.get("token") or ""))
            status: dict[str, Any] = (
                {"authenticated": True, "user": user}
                if user is not None
                else {"authenticated": False, "error": "invalid bearer token"}
            )
        else:
            attributes = spec.get("nonResourceAttributes") or {}
            wanted = (spec.get("user"), attributes.get("verb"), attributes.get("path"))
            status = {"allowed": wanted in self.allowed}
            if status["allowed"]:
                status["reason"] = "allowed by the test's RBAC"
        return {**review, "status": status}

    @staticmethod
    def _is_binding(request: rendering.Request) -> bool:
        return str(request.method.value).upper() == "POST" and request.subresource == "binding"

    async def _replace(self, request: rendering.Request) -> rendering.Payload:
        key: Any = (request.resource, request.namespace, request.name)
        current = self._current(key)
        body = request.data
        if current is None:
            raise _not_found(key)
        if not isinstance(body, dict):
            raise KubernetesError(
                status=400, reason="BadRequest", message="body is not an object", details={}
            )
        _check_schema(request.resource, body)
        meta = body.setdefault("metadata", {})
        self._check_version(key, current, meta.get("resourceVersion"))
        version = self._version + 1
        old_meta = current.get("metadata") or {}
        for kept in ("uid", "creationTimestamp", "namespace", "name"):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
        meta["resourceVersion"] = str(version)
        async with self._lock:
            self._objects[key].create(body)
        await self._append(Change(version, key[0], "MODIFIED", key[1], key[2], body))
        return body

    async def _bind(self, request: rendering.Request) -> rendering.Payload:
        key: Any = (request.resource, request.namespace, request.name)
        pod = self._current(key)
        if pod is None or request.resource is None or request.resource.plural != "pods":
            raise _not_found(key)
        body = request.data if isinstance(request.data, dict) else {}
        target = (body.get("target") or {}).get("name")
        if not target:
            raise KubernetesError(
                status=400,
                reason="BadRequest",
                message="Binding target.name is required",
                details={},
            )
        meta = pod.get("metadata") or {}
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != meta.get("uid"):
            raise KubernetesError(
                status=409,
                reason="Conflict",
                details={},
                message=f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise KubernetesError(
                status=409,
                reason="Conflict",
                details={},
                message=f'pod {request.name} is already assigned to node "{bound}"',
            )
        version = self._version + 1
        async with self._lock:
            self._objects[key].patch(
                {"metadata": {"resourceVersion": str(version)}, "spec": {"nodeName": target}}
            )
            raw = self._objects[key].raw
        await self._append(Change(version, key[0], "MODIFIED", key[1], key[2], raw))
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        return rendering.Response(status=201, payload=status)

    # reading --------------------------------------------------------------------------------
    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        async with self._lock:
            items = [raw for raw in self._matching_objects(request)]
            version = self._version
        return {
            "kind": "List",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(version)},
            "items": items,
        }

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # send the headers now, like kube-apiserver
        epoch = self._watch_epoch
        since = str(request.params.get("resourceVersion") or "")
        timeout = float(request.params.get("timeoutSeconds") or 0) or None
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        if since not in ("", "0") and int(since) < self._floor:
            yield {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "reason": "Expired",
                    "code": 410,
                    "message": f"too old resource version: {since} ({self._floor})",
                },
            }
            return
        if since in ("", "0"):
            async with self._lock:
                initial = list(self._matching_objects(request))
                position = len(self._history)
            for raw in initial:
                yield {"type": "ADDED", "object": raw}
        else:
            position = next(
                (i for i, c in enumerate(self._history) if c.version > int(since)),
                len(self._history),
            )
        while True:
            while position < len(self._history) and not self._held:
                if epoch != self._watch_epoch:
                    return
                change = self._history[position]
                position += 1
                if self._selects(request, change.resource, change.namespace, change.object):
                    yield {"type": change.type, "object": change.object}
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if epoch != self._watch_epoch or (left is not None and left <= 0):
                return
            if not await self._wait_for_change(position, epoch, left):
                return

    async def _wait_for_change(self, position: int, epoch: int, timeout: float | None) -> bool:
        """Wait until history grows past `position` or watches are dropped; False on timeout."""

        def ready() -> bool:
            grown = len(self._history) > position and not self._held
            return grown or epoch != self._watch_epoch

        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(ready), timeout)
        except TimeoutError:
            return False
        return True

    def _matching_objects(self, request: rendering.Request) -> list[dict[str, Any]]:
        found = []
        for (resource, namespace, _), obj in self._objects.items():
            if obj.deleted:
                continue
            raw = obj.raw
            if self._selects(request, resource, namespace, raw):
                found.append(raw)
        return found

    @staticmethod
    def _selects(
        request: rendering.Request, resource: Any, namespace: str | None, raw: Mapping[str, Any]
    ) -> bool:
        if resource != request.resource:
            return False
        if request.namespace is not None and namespace != request.namespace:
            return False
        if request.name is not None and (raw.get("metadata") or {}).get("name") != request.name:
            return False
        fields = str(request.params.get("fieldSelector") or "")
        labels = str(request.params.get("labelSelector") or "")
        return _fields_match(fields, raw) and _labels_match(labels, raw)


def _fields_match(selector: str, raw: Mapping[str, Any]) -> bool:
    for term in filter(None, selector.split(",")):
        negate = "!=" in term
        path, _, wanted = term.replace("!=", "=").replace("==", "=").partition("=")
        value: Any = raw
        for part in path.strip().split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if ((value or "") == wanted.strip()) == negate:
            return False
    return True


def _labels_match(selector: str, raw: Mapping[str, Any]) -> bool:
    labels = (raw.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, has_value, wanted = term.partition("=")
        if (labels.get(key.strip()) != wanted.strip()) if has_value else key.strip() not in labels:
            return False
    return True


def _check_schema(resource: Any, data: Any) -> None:
    """422 Invalid when `data`, a whole object created or put, is of a schema-checked kind and
    does not pass (patches are not checked)."""
    versions = SCHEMA_CHECKED.get((getattr(resource, "group", ""), getattr(resource, "plural", "")))
    if not versions or not isinstance(data, dict):
        return
    for version in versions:
        try:
            kubernetes_validate.validate(data, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise KubernetesError(
                status=422,
                reason="Invalid",
                details={"kind": resource.plural},
                message=f"{resource.plural} is invalid for Kubernetes {version}: "
                f"{str(exc).splitlines()[0]}",
            ) from None


def _not_found(key: Any) -> KubernetesError:
    resource, _, name = key
    return KubernetesError(
        status=404,
        reason="NotFound",
        details={"name": name},
        message=f'{getattr(resource, "plural", "object")} "{name}" not found',
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# builders for test objects -------------------------------------------------------------------
def node_manifest(
    name: str,
    annotations: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        },
        "status": {"allocatable": dict(allocatable or {})},
    }


def pod_manifest(
    namespace: str,
    name: str,
    *,
    limits: Mapping[str, Any] | None = None,
    containers: list[dict[str, Any]] | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    scheduler_name: str | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    """A pod with one container `main` limited to `limits`, unless `containers` is given."""
    spec: dict[str, Any] = {
        "containers": containers
        or [{"name": "main", "image": "busybox", "resources": {"limits": dict(limits or {})}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def quota_manifest(namespace: str, name: str, hard: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": dict(hard)},
    }


# the running server ---------------------------------------------------------------------------
class RunningApiServer:
    """An `ApiServerEmulator` served on 127.0.0.1 by a background thread with its own loop.

    `url` is the API's base URL (e.g. for `ConnectionSettings(host=url)`), `kubeconfig(path)`
    writes a kubeconfig pointing at it (for a `vgpu` process started by a test). The helpers
    below talk to it over HTTP like any client, so every change gets a resourceVersion and
    reaches watches:

        api.create("/api/v1/nodes", node_manifest("gpu-1"))
        api.merge_patch("/api/v1/nodes/gpu-1", {"metadata": {"labels": {"a": "b"}}})
        api.get("/api/v1/namespaces/default/pods/p1")   # None when missing
        api.delete("/api/v1/namespaces/default/pods/p1")
        api.drop_watches()                              # clients reconnect and resume
        api.hold_watches(); ...; api.expire_history()   # changes missed, then 410 Gone

    `emulator` is the kmock object: `list(emulator)` is every request clients sent, and kmock's
    DSL adds reactions, e.g. `emulator["post", kmock.resource("", "v1", "events")] << 500`.
    """

    def __init__(self, port: int | None = None) -> None:
        """Serve on `port`, or on a free port the system picks (the default)."""
        self.emulator = ApiServerEmulator()
        self._port = port
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="k8s-emulator", daemon=True)
        self._http: httpx.Client | None = None

    def start(self, timeout: float = 10.0) -> RunningApiServer:
        self._thread.start()
        if not self._ready.wait(timeout) or self._failure is not None:
            raise RuntimeError(f"the API emulator did not start: {self._failure}")
        self._http = httpx.Client(base_url=self.url, timeout=10.0)
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        if self._loop is not None and self._stopping is not None:
            self.end_delays()  # a held-back answer must not hold up the shutdown
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(15)

    def __enter__(self) -> RunningApiServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # synchronous helpers -----------------------------------------------------------------
    def create(self, collection: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        return self._send("POST", collection, manifest)

    def get(self, path: str) -> dict[str, Any] | None:
        response = self._client().get(path)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def list_items(self, collection: str) -> list[dict[str, Any]]:
        data = self.get(collection) or {}
        items: list[dict[str, Any]] = data.get("items") or []
        return items

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._send("PATCH", path, body, MERGE_PATCH)

    def delete(self, path: str) -> None:
        self._client().delete(path).raise_for_status()

    def compact(self) -> None:
        """Watches resuming from any resourceVersion before now get 410 Gone."""
        self._call(self.emulator.compact())

    def hold_watches(self) -> None:
        """Keep changes from reaching open watches until `expire_history()`."""
        self._call(self.emulator.hold_watches())

    def expire_history(self) -> None:
        """Compact and end every watch: clients that resume get 410 Gone and must relist."""
        self._call(self.emulator.expire_history())

    def drop_watches(self) -> None:
        """Close every open watch stream; clients reconnect from their last resourceVersion."""
        self._call(self.emulator.drop_watches())

    def delay(self, method: str, path_part: str, seconds: float) -> None:
        """Answer `method` requests whose path contains `path_part` only after `seconds`
        (they take effect at once): e.g. `delay("POST", "/binding", 5)`."""
        self._call(self.emulator.delay(method, path_part, seconds))

    def end_delays(self) -> None:
        self._call(self.emulator.end_delays())

    def accept_token(self, token: str, username: str, groups: tuple[str, ...] = ()) -> None:
        """TokenReview says `token` is `username`'s."""
        self.emulator.tokens[token] = {"username": username, "uid": f"uid-{username}",
                                       "groups": list(groups)}  # fmt: skip

    def allow(self, username: str, verb: str, path: str) -> None:
        """SubjectAccessReview allows `username` to `verb` the non-resource URL `path`."""
        self.emulator.allowed.add((username, verb, path))

    def set_reviews_down(self, down: bool) -> None:
        """Make TokenReview and SubjectAccessReview answer 503 (or answer again)."""
        self.emulator.reviews_down = down

    def requests(self, method: str, path_prefix: str = "") -> list[Any]:
        """Requests clients sent with `method` (e.g. "GET") whose path starts with the prefix."""
        return [
            r
            for r in list(self.emulator)
            if str(r.method.value).upper() == method.upper() and r.url.path.startswith(path_prefix)
        ]

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig (JSON is valid YAML) whose current context points here."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "tester"}}
            ],
            "current-context": "emulator",
        }
        path.write_text(json.dumps(config))
        return path

    # internals ---------------------------------------------------------------------------
    def _client(self) -> httpx.Client:
        if self._http is None:
            raise RuntimeError("the API emulator is not started")
        return self._http

    def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any],
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        response = self._client().request(
            method, path, content=json.dumps(body), headers={"Content-Type": content_type}
        )
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        data: dict[str, Any] = response.json()
        return data

    def _call(self, coroutine: Any) -> Any:
        if self._loop is None:
            raise RuntimeError("the API emulator is not started")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to start(); the thread must not die silently
            self._failure = exc
            self._ready.set()
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        async with (
            self.emulator,
            kmock.Server(self.emulator, host="127.0.0.1", port=self._port) as server,
        ):
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stopping.wait()
            await self.emulator.drop_watches()  # lets the server close without waiting on them
