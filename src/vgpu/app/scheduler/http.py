"""The HTTP face of the scheduler, as four ASGI apps, one per listener.

- `webhook_app`: `POST /webhook` for the API server (`POST /webhook/dra` for pods whose GPU
  requests become DRA claims), and `/healthz`, `/readyz` for the kubelet.
- `extender_app`: `POST /filter`, `/prioritize`, `/bind` (and `/preempt` when given a
  preempter) for kube-scheduler, and `/healthz`.
- `metrics_app`: `GET /metrics` for Prometheus (with a guard, for allowed bearer tokens only).
- `explain_app`: `GET /explain/<ns>/<name>`: the scheduler's last decision on a pod, explained
  (read-only; it tells any namespace's requests and cards, so its listener is loopback).

Every extender verb answers HTTP 200 with errors in the protocol's `Error` field, and the
webhook answers an AdmissionReview for anything it is sent: a bad body becomes a message and a
log line, never a 500 with a stack trace, and never a change to the ledger.

Verbs that call the API (filter, bind, preempt), reviews and scrapes run on each app's own
bounded thread pool, never on the event loop and never on a pool shared with anything else;
`/healthz` and `/readyz` are answered on the event loop itself, so that a verb stuck on a slow
API cannot make the kubelet kill the process. `/prioritize` only reads the scheduler's state:
given `state_lock`, it runs on the event loop (no thread hop) when that lock is free at once,
and on the pool when another thread holds it, so the loop never waits for a lock.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel

from vgpu.app.exposition import CONTENT_TYPE
from vgpu.app.metrics_guard import MetricsGuard
from vgpu.app.scheduler.explanations import ExplanationStore
from vgpu.app.scheduler.http_bodies import (
    BODY_LIMIT,
    AdmissionRequest,
    AdmissionReview,
    BindingArgs,
    BodyError,
    ExtenderArgs,
    PreemptionArgs,
    admission_reply,
    bind_reply,
    decode,
    filter_error,
    filter_reply,
    preempt_reply,
    prioritize_reply,
)
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.preempt import NodeVictims, PreemptResult
from vgpu.app.scheduler.review_identity import review_identity
from vgpu.app.scheduler.routes import Routes
from vgpu.app.scheduler.service import FilterResult, PrioritizeResult
from vgpu.domain import AdmissionDecision

log = logging.getLogger(__name__)

Readiness = Callable[[], str]  # '' when ready, else why not; must not wait on anything
LockIfFree = Callable[[], AbstractContextManager[bool]]  # holds the lock when True; never waits
Args = TypeVar("Args", bound=BaseModel)
Result = TypeVar("Result")


class Admitter(Protocol):
    """What the webhook needs of the scheduler."""

    def admit(self, manifest: Mapping[str, Any], namespace: str) -> AdmissionDecision: ...


class DraAdmitter(Protocol):
    """What the webhook's DRA mode needs: the answer, with nothing made on a dry run."""

    def admit(
        self, manifest: Mapping[str, Any], namespace: str, dry_run: bool = False
    ) -> AdmissionDecision: ...


class Extender(Protocol):
    """What the extender verbs need of the scheduler."""

    def filter(
        self,
        manifest: Mapping[str, Any],
        node_names: Sequence[str] | None,
        nodes: Sequence[Mapping[str, Any]] | None,
    ) -> FilterResult: ...

    def prioritize(
        self,
        manifest: Mapping[str, Any],
        node_names: Sequence[str] | None,
        nodes: Sequence[Mapping[str, Any]] | None,
    ) -> PrioritizeResult: ...

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str: ...


class Preemption(Protocol):
    """What the preempt verb needs of the scheduler."""

    def preempt(
        self, manifest: Mapping[str, Any], proposals: Mapping[str, NodeVictims]
    ) -> PreemptResult: ...


def webhook_app(
    service: Admitter,
    metrics: SchedulerMetrics,
    readiness: Readiness,
    workers: int = 4,
    dra: DraAdmitter | None = None,
) -> FastAPI:
    """`POST /webhook` (and, given `dra`, `POST /webhook/dra`: the DRA mode), `GET /healthz`,
    `/readyz`; reviews run on `workers` threads."""
    app, pool = _app("webhook", workers)
    _health(app, readiness)

    def device_plugin_mode(request: AdmissionRequest) -> AdmissionDecision:
        return service.admit(request.object or {}, request.namespace)

    @app.post("/webhook")
    async def webhook(request: Request) -> Response:
        return await _webhook(request, pool, metrics, "webhook", device_plugin_mode)

    if dra is not None:
        dra_admitter = dra

        def dra_mode(request: AdmissionRequest) -> AdmissionDecision:
            return dra_admitter.admit(
                request.object or {}, request.namespace, dry_run=bool(request.dryRun)
            )

        @app.post("/webhook/dra")
        async def webhook_dra(request: Request) -> Response:
            return await _webhook(request, pool, metrics, "webhook_dra", dra_mode)

    return app


async def _webhook(
    request: Request,
    pool: ThreadPoolExecutor,
    metrics: SchedulerMetrics,
    verb: str,
    decide: Callable[[AdmissionRequest], AdmissionDecision],
) -> Response:
    started = time.perf_counter()
    loop = asyncio.get_running_loop()
    body = b""
    try:
        body, complete = await _read_at_most(request, BODY_LIMIT)
        if not complete:  # what was read still names the review, to be echoed
            raise BodyError(f"request body is over the {BODY_LIMIT} byte limit")
        review = decode(body, AdmissionReview)
        reply = await loop.run_in_executor(pool, _review, decide, review)
    except BodyError as exc:
        message = f"bad AdmissionReview: {exc}"
        reply = await loop.run_in_executor(pool, _refusal, body, 400, message)
    except Exception as exc:
        log.exception("%s failed", verb)
        message = f"internal error: {exc}"
        reply = await loop.run_in_executor(pool, _refusal, body, 500, message)
    allowed = reply["response"]["allowed"]
    _observe(metrics, verb, "allowed" if allowed else "denied", started)
    return _json(reply)


def extender_app(
    service: Extender,
    metrics: SchedulerMetrics,
    workers: int = 8,
    preempter: Preemption | None = None,
    state_lock: LockIfFree | None = None,
) -> Routes:
    """`POST /filter`, `/prioritize`, `/bind`, `/preempt` (with a `preempter`) and
    `GET /healthz`; verbs run on `workers` threads of the app's own pool, `/prioritize` on the
    event loop while `state_lock` (what it reads under) is free."""
    pool = _pool("extender", workers)
    app = Routes(on_shutdown=lambda: _stop(pool))
    _health(app, None)

    def filtered(args: ExtenderArgs) -> tuple[dict[str, Any], str]:
        result = service.filter(args.Pod, args.NodeNames, args.node_objects())
        reply = filter_reply(result)
        return reply, "error" if result.error else ("placed" if _survivors(reply) else "unplaced")

    @app.post("/filter")
    async def filter_(request: Request) -> Response:
        started = time.perf_counter()
        done, failure = await _verb("filter", request, ExtenderArgs, filtered, pool)
        reply, outcome = done if done is not None else (filter_error(failure), "error")
        _observe(metrics, "filter", outcome, started)
        return _json(reply)

    def prioritized(args: ExtenderArgs) -> PrioritizeResult:
        return service.prioritize(args.Pod, args.NodeNames, args.node_objects())

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        started = time.perf_counter()
        result, failure = await _verb(
            "prioritize", request, ExtenderArgs, prioritized, pool, state_lock
        )
        if result is not None and result.error:
            log.warning("prioritize: %s", result.error)
            failure = result.error
        if result is None or failure:
            _observe(metrics, "prioritize", "error", started)
            return _json({"Error": failure}, status_code=400)
        _observe(metrics, "prioritize", "scored", started)
        return _json(prioritize_reply(result))

    def bound(args: BindingArgs) -> str:
        return service.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node)

    @app.post("/bind")
    async def bind(request: Request) -> Response:
        started = time.perf_counter()
        result, failure = await _verb("bind", request, BindingArgs, bound, pool)
        error = failure if result is None else result
        _observe(metrics, "bind", "error" if error else "bound", started)
        return _json(bind_reply(error))

    if preempter is not None:
        _preempt_route(app, preempter, metrics, pool)
    return app


def _preempt_route(
    app: Routes, preempter: Preemption, metrics: SchedulerMetrics, pool: ThreadPoolExecutor
) -> None:
    """`POST /preempt`. ExtenderPreemptionResult has no error field: a request that cannot be
    answered gets HTTP 400 with `{"Error": ...}`, which kube-scheduler reports as an error."""

    def preempted(args: PreemptionArgs) -> PreemptResult:
        return preempter.preempt(args.Pod, args.proposals())

    @app.post("/preempt")
    async def preempt(request: Request) -> Response:
        started = time.perf_counter()
        result, failure = await _verb("preempt", request, PreemptionArgs, preempted, pool)
        if result is not None and result.error:
            log.warning("preempt: %s", result.error)
            failure = result.error
        if result is None or failure:
            _observe(metrics, "preempt", "error", started)
            return _json({"Error": failure}, status_code=400)
        _observe(metrics, "preempt", "kept" if result.nodes else "none", started)
        return _json(preempt_reply(result))


def metrics_app(metrics: SchedulerMetrics, guard: MetricsGuard | None = None) -> FastAPI:
    """`GET /metrics`, rendered on a thread (it reads the state under its lock); with `guard`,
    only for bearer tokens it lets through (its reviews run on the thread pool too)."""
    app, pool = _app("metrics", 2)

    @app.get("/metrics")
    async def metrics_(request: Request) -> Response:
        loop = asyncio.get_running_loop()
        if guard is not None:
            authorization = request.headers.get("authorization")
            refusal = await loop.run_in_executor(pool, guard.check, authorization)
            if refusal is not None:
                return PlainTextResponse(
                    f"{refusal.message}\n", refusal.status, headers=dict(refusal.headers)
                )
        text = await loop.run_in_executor(pool, metrics.render)
        return Response(text, media_type=CONTENT_TYPE)

    return app


def explain_app(store: ExplanationStore) -> FastAPI:
    """`GET /explain/<namespace>/<name>`, worked out on a thread (it searches for changes)."""
    app, pool = _app("explain", 1)

    @app.get("/explain/{namespace}/{name}")
    async def explain(namespace: str, name: str) -> Response:
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(pool, store.explanation, namespace, name)
        if found is None:
            why = f"no scheduling decision on pod {namespace}/{name} is remembered"
            return _json({"error": why}, status_code=404)
        return _json(found.to_dict())

    return app


def _pool(name: str, workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"vgpu-{name}")


def _stop(pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False, cancel_futures=True)  # a verb hanging on the API must not hold
    # up the exit


def _app(name: str, workers: int) -> tuple[FastAPI, ThreadPoolExecutor]:
    """A bare app with its own pool of `workers` threads, shut down when its server stops."""
    pool = _pool(name, workers)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            _stop(pool)

    app = FastAPI(
        title=f"vgpu scheduler {name}",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    return app, pool


def _health(app: FastAPI | Routes, readiness: Readiness | None) -> None:
    """`/healthz` (and `/readyz` with a readiness check) as coroutines: they run on the event
    loop, so no busy thread pool can delay them."""

    @app.get("/healthz")
    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    if readiness is None:
        return

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        why = readiness()
        if why:
            return PlainTextResponse(f"not ready: {why}", status_code=503)
        return PlainTextResponse("ok")


def _refusal(body: bytes, code: int, message: str) -> dict[str, Any]:
    """A denial of a review that could not be answered, echoing its uid where it can be read:
    a pod that was not read is never admitted (the webhook's stripping and quota check would be
    skipped). Only a review whose uid cannot be read at all gets uid "", which kube-apiserver
    takes as a failed call, leaving the pod to the webhook's failurePolicy."""
    version, uid = review_identity(body)
    log.warning("webhook: review %s denied: %s", uid or "(uid unreadable)", message)
    return admission_reply(version, uid, allowed=False, code=code, message=message)


def _review(
    decide: Callable[[AdmissionRequest], AdmissionDecision], review: AdmissionReview
) -> dict[str, Any]:
    request = review.request
    version, uid = review.apiVersion, request.uid
    kind = (request.kind or {}).get("kind", "Pod")
    if kind != "Pod" or request.operation != "CREATE":
        return admission_reply(
            version, uid, allowed=True, code=200, message=f"{request.operation} {kind}: not ours"
        )
    if request.object is None:
        return admission_reply(
            version, uid, allowed=False, code=400, message="request.object (the pod) is missing"
        )
    decision = decide(request)
    meta = request.object.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    who = f"{request.namespace}/{meta.get('name') or meta.get('generateName') or '?'}"
    if not decision.allowed:
        log.info("webhook: pod %s denied: %s", who, decision.message)
        return admission_reply(version, uid, allowed=False, code=403, message=decision.message)
    if decision.mutates:
        log.info("webhook: pod %s: %s", who, decision.message)
        return admission_reply(version, uid, allowed=True, code=200, patch=decision.patch)
    return admission_reply(version, uid, allowed=True, code=200, message=decision.message)


async def _verb(
    verb: str,
    request: Request,
    model: type[Args],
    work: Callable[[Args], Result],
    pool: ThreadPoolExecutor,
    inline_under: LockIfFree | None = None,
) -> tuple[Result | None, str]:
    """`(work(args), "")` for the decoded body, run on a thread of `pool` (or, given
    `inline_under`, on the event loop when that lock is free); `(None, why)` when the body is
    bad or `work` fails: logged here, so that a verb answers it in its own reply."""
    try:
        args = decode(await _body(request), model, fold_case=True)
        if inline_under is not None:
            with inline_under() as free:
                if free:
                    return work(args), ""
        return await asyncio.get_running_loop().run_in_executor(pool, work, args), ""
    except BodyError as exc:
        log.warning("%s: bad request: %s", verb, exc)
        return None, f"bad request: {exc}"
    except Exception as exc:
        log.exception("%s failed", verb)
        return None, f"internal error: {exc}"


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > BODY_LIMIT:
        raise BodyError(f"request body of {declared} bytes is over the {BODY_LIMIT} byte limit")
    body, complete = await _read_at_most(request, BODY_LIMIT)
    if not complete:
        raise BodyError(f"request body is over the {BODY_LIMIT} byte limit")
    return body


async def _read_at_most(request: Request, limit: int) -> tuple[bytes, bool]:
    """The body and True; or, for a longer one, its first `limit` bytes and False."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], False
    return b"".join(chunks), True


def _survivors(reply: dict[str, Any]) -> bool:
    nodes = reply["Nodes"]
    return bool(reply["NodeNames"]) or bool(nodes and nodes["items"])


def _observe(metrics: SchedulerMetrics, verb: str, outcome: str, started: float) -> None:
    metrics.latency.labels(verb).observe(time.perf_counter() - started)
    metrics.outcomes.labels(verb, outcome).inc()


def _json(body: Any, status_code: int = 200) -> Response:
    """A JSON reply serialised by orjson (several times faster than the standard library on
    the large filter answers)."""
    return Response(orjson.dumps(body), status_code=status_code, media_type="application/json")
