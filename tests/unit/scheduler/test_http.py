"""The HTTP edge through FastAPI's TestClient: kube-scheduler's and the API server's JSON,
and garbage that must get a protocol error, never a 500 and never a ledger change."""

import base64
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.scheduler.builders import World, a40_node, manifest, world
from vgpu.app.scheduler.http import extender_app, metrics_app, webhook_app
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.ports.cluster import Quota


@pytest.fixture
def w() -> World:
    return world(a40_node("node1"))


@pytest.fixture
def metrics(w: World) -> SchedulerMetrics:
    return SchedulerMetrics(w.state, w.config.vendor(), w.runtime.is_leader)


@pytest.fixture
def extender(w: World, metrics: SchedulerMetrics) -> TestClient:
    return TestClient(extender_app(w.service, metrics, state_lock=w.state.locked_if_free))


@pytest.fixture
def webhook(w: World, metrics: SchedulerMetrics) -> TestClient:
    return TestClient(webhook_app(w.service, metrics, w.runtime.readiness))


@pytest.fixture
def scrape(metrics: SchedulerMetrics) -> TestClient:
    return TestClient(metrics_app(metrics))


def review(pod: dict[str, Any], version: str = "admission.k8s.io/v1", uid: str = "u-1") -> Any:
    return {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": pod["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def unscheduled(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"].pop("schedulerName")
    return body


# filter ----------------------------------------------------------------------------------------
def test_filter_answers_with_go_keys_and_nulls(extender: TestClient, w: World) -> None:
    w.add_pod(manifest("p", gpu=1, gpumem=20000, gpucores=80))
    args = {
        "Pod": manifest("p", gpu=1, gpumem=20000, gpucores=80),
        "Nodes": None,
        "NodeNames": ["node1"],
    }
    response = extender.post("/filter", json=args)
    assert response.status_code == 200
    assert response.json() == {
        "Nodes": None,
        "NodeNames": ["node1"],
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": "",
    }


def test_filter_keys_are_read_without_regard_to_case_like_go(
    extender: TestClient, w: World
) -> None:
    w.add_pod(manifest("p", cpu="1"))
    args = {"pod": manifest("p", cpu="1"), "nodenames": ["node1"]}
    assert extender.post("/filter", json=args).json()["NodeNames"] == ["node1"]


GARBAGE = [
    (b"", "empty request body"),
    (b"{not json", "not JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"Pod"', "must be a JSON object"),
    (b"\xff\xfe\x00", "not"),
    (b'{"Pod": {}, "NodeNames": ["a"], "Extra": 1}', "field Extra: Extra inputs are not permitted"),
    (b'{"Pod": "a pod", "NodeNames": ["a"]}', "field Pod: Input should be a valid dictionary"),
    (b'{"Pod": {}, "NodeNames": [1, 2]}', "field NodeNames[0]"),
    (b'{"Pod": {}, "NodeNames": "node1"}', "field NodeNames"),
    (b'{"NodeNames": ["node1"]}', "field Pod: Field required"),
    (b'{"Pod": {"spec": []}, "NodeNames": ["node1"]}', "pod spec must be an object"),
    (b'{"Pod": {}, "Nodes": {"items": [{"metadata": 5}]}}', "field Nodes.items[0].metadata"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
]


@pytest.mark.parametrize(("body", "says"), GARBAGE)
def test_filter_garbage_gets_the_error_field_and_changes_nothing(
    extender: TestClient, w: World, body: bytes, says: str
) -> None:
    response = extender.post("/filter", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    reply = response.json()
    assert says in reply["Error"]
    assert reply["NodeNames"] is None
    assert w.state.ledger.pods() == []


def test_container_garbage_inside_the_pod_is_an_error_not_a_crash(
    extender: TestClient, w: World
) -> None:
    weird = manifest("p", gpu=1)
    weird["spec"]["containers"][0]["env"] = 5
    weird["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = [1]
    reply = extender.post("/filter", json={"Pod": weird, "NodeNames": ["node1"]}).json()
    assert reply["Error"]
    assert w.state.ledger.pods() == []


def test_a_huge_number_in_the_scoring_weights_is_refused_naming_the_annotation(
    extender: TestClient, w: World
) -> None:
    weights = f"slot={'9' * 256000},core=1,memory=1"
    pod = manifest("p", gpu=1, annotations={"hami.io/device-scoring-weights": weights})
    w.add_pod(pod)
    error = extender.post("/filter", json={"Pod": pod, "NodeNames": ["node1"]}).json()["Error"]
    assert "annotation hami.io/device-scoring-weights: item #0" in error
    assert "slot='99" in error and "characters) is not a whole number" in error
    assert len(error) < 500 and "internal error" not in error
    assert w.state.ledger.pods() == []


def test_bodies_over_one_mib_are_refused(extender: TestClient, w: World) -> None:
    pod = manifest("p", gpu=1, annotations={"padding": "x" * (1 << 20)})
    reply = extender.post("/filter", json={"Pod": pod, "NodeNames": ["node1"]}).json()
    assert "byte limit" in reply["Error"]
    assert w.state.ledger.pods() == []


# prioritize ------------------------------------------------------------------------------------
def test_prioritize_returns_a_host_priority_list(extender: TestClient) -> None:
    args = {
        "Pod": manifest("p", gpu=1, gpumem=46068, gpucores=100),
        "Nodes": None,
        "NodeNames": ["node1", "cpu"],
    }
    reply = extender.post("/prioritize", json=args).json()
    assert [h["Host"] for h in reply] == ["node1", "cpu"]
    assert reply[1]["Score"] == 0 and 0 < reply[0]["Score"] <= 10


def test_prioritize_is_answered_without_a_thread_hop_while_the_state_is_free(
    extender: TestClient, w: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    real = w.service.prioritize

    def recorded(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(w.service, "prioritize", recorded)
    args = {"Pod": manifest("p", gpu=1), "Nodes": None, "NodeNames": ["node1"]}
    reply = extender.post("/prioritize", json=args).json()
    assert reply[0]["Host"] == "node1" and reply[0]["Score"] > 0
    assert len(threads) == 1 and not threads[0].startswith("vgpu-extender")


def test_prioritize_waits_on_a_worker_while_another_thread_holds_the_state(
    w: World, metrics: SchedulerMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    held, done = threading.Event(), threading.Event()

    def hold_the_state() -> None:
        with w.state.locked():
            held.set()
            assert done.wait(60), "the test never let go of the state"

    holder = threading.Thread(target=hold_the_state)
    holder.start()
    assert held.wait(30)
    entered = threading.Semaphore(0)
    real = w.service.prioritize

    def announced(*args: Any) -> Any:
        entered.release()
        return real(*args)  # waits for the state lock

    monkeypatch.setattr(w.service, "prioritize", announced)
    app = extender_app(w.service, metrics, workers=2, state_lock=w.state.locked_if_free)
    with TestClient(app) as client:
        try:
            args = {"Pod": manifest("p", gpu=1), "Nodes": None, "NodeNames": ["node1"]}
            pool = ThreadPoolExecutor(1)
            pending = pool.submit(client.post, "/prioritize", json=args)
            pool.shutdown(wait=False)
            assert entered.acquire(timeout=30), "prioritize never started"
            assert _answered(client, "/healthz") == 200
            assert not pending.done()
        finally:
            done.set()
            holder.join(30)
        reply = pending.result(30).json()
    assert reply[0]["Host"] == "node1" and reply[0]["Score"] > 0


def test_prioritize_garbage_is_a_400_with_a_message(extender: TestClient) -> None:
    response = extender.post("/prioritize", content=b"{oops")
    assert response.status_code == 400
    assert "not JSON" in response.json()["Error"]


# bind ------------------------------------------------------------------------------------------
def test_bind_round_trip(extender: TestClient, w: World) -> None:
    body = manifest("p", gpu=1, gpumem=1000)
    w.add_pod(body)
    assert extender.post("/filter", json={"Pod": body, "NodeNames": ["node1"]}).json()["NodeNames"]
    args = {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "node1"}
    assert extender.post("/bind", json=args).json() == {"Error": ""}
    assert w.cluster.bindings == [("default", "p", "node1")]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"PodName": "p", "PodNamespace": "default", "Node": 5}, "field Node"),
        ({"PodName": "p", "PodNamespace": "default"}, "field Node: Field required"),
        ({"PodName": "", "PodNamespace": "default", "Node": "n"}, "field PodName"),
        ({"PodName": "p", "PodNamespace": "d", "Node": "n", "Oops": 1}, "field Oops"),
        ({"PodName": "ghost", "PodNamespace": "default", "Node": "node1"}, "not found"),
    ],
)
def test_bind_errors_are_in_the_error_field(
    extender: TestClient, args: dict[str, Any], says: str
) -> None:
    response = extender.post("/bind", json=args)
    assert response.status_code == 200
    assert says in response.json()["Error"]


# webhook ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_webhook_answers_in_the_version_received_with_a_base64_json_patch(
    webhook: TestClient, version: str
) -> None:
    pod = unscheduled(manifest("p", gpu=1, gpumem=1000))
    reply = webhook.post("/webhook", json=review(pod, version, uid="abc-123")).json()
    assert reply["apiVersion"] == version and reply["kind"] == "AdmissionReview"
    response = reply["response"]
    assert response["uid"] == "abc-123" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/spec/schedulerName", "value": "vgpu-scheduler"} in patch


def test_webhook_leaves_gpu_less_pods_alone(webhook: TestClient) -> None:
    reply = webhook.post("/webhook", json=review(unscheduled(manifest("p", cpu="1")))).json()
    response = reply["response"]
    assert response["allowed"] is True and "patch" not in response


def test_webhook_denies_over_quota_with_a_message(webhook: TestClient, w: World) -> None:
    w.cluster.put_quota(Quota("team", "q", {"limits.nvidia.com/gpumem": "1000"}))
    pod = unscheduled(manifest("p", "team", gpu=2, gpumem=1000))
    response = webhook.post("/webhook", json=review(pod)).json()["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
    assert "exceeding resource quota" in response["status"]["message"]


def test_webhook_denies_a_bad_quantity_naming_it(webhook: TestClient) -> None:
    pod = unscheduled(manifest("p", gpu=1, gpumem="-3"))
    response = webhook.post("/webhook", json=review(pod)).json()["response"]
    assert response["allowed"] is False
    assert "nvidia.com/gpumem" in response["status"]["message"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{nope", "not JSON"),
        (b"{}", "field apiVersion"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "field request"),
        (
            b'{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview", "request": {}}',
            "field apiVersion",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", '
            b'"request": {"uid": "u", "object": {"spec": "x"}}}',
            "pod spec must be an object",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", '
            b'"request": {"uid": "u"}, "surprise": true}',
            "field surprise",
        ),
    ],
)
def test_webhook_garbage_is_denied_with_a_message(
    webhook: TestClient, body: bytes, says: str
) -> None:
    response = webhook.post("/webhook", content=body)
    assert response.status_code == 200
    reply = response.json()
    assert reply["kind"] == "AdmissionReview"
    assert reply["response"]["allowed"] is False
    assert says in reply["response"]["status"]["message"]


def test_webhook_echoes_the_uid_and_version_of_a_review_it_cannot_use(
    webhook: TestClient,
) -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1beta1",
        "kind": "AdmissionReview",
        "request": {"uid": "zz-9", "object": "not a pod"},
    }
    reply = webhook.post("/webhook", json=body).json()
    assert reply["apiVersion"] == "admission.k8s.io/v1beta1"
    assert reply["response"]["uid"] == "zz-9"
    assert reply["response"]["status"]["code"] == 400


def hostile(uid: str, version: str = "admission.k8s.io/v1") -> dict[str, bytes]:
    """Reviews of one pod, each unreadable in its own way after `request.uid` (where the API
    server writes it)."""
    text = json.dumps(review(manifest("p", gpu=1), version, uid)).encode()

    def last_field(replacement: bytes) -> bytes:
        return text.replace(b'"dryRun": false', replacement)

    return {
        "5000-digit number": last_field(b'"dryRun": ' + b"9" * 5000),
        "number past a double": last_field(b'"dryRun": 1e400'),
        "nested too deeply": last_field(b'"x": ' + b"[" * 5000 + b"]" * 5000),
        "over one MiB": last_field(b'"pad": "' + b"x" * (2 << 20) + b'"'),
        "cut short": text.partition(b'"kind": {')[0],  # up to the request's kind
        "not UTF-8 later": last_field(b'"x": "\xff"'),
        "wrong type later": last_field(b'"dryRun": "yes"'),
        "garbage after": text + b"}}}",
    }


@pytest.mark.parametrize("case", sorted(hostile("u")))
@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_webhook_denies_an_unreadable_review_echoing_its_uid_and_version(
    webhook: TestClient, w: World, case: str, version: str
) -> None:
    response = webhook.post("/webhook", content=hostile("uid-42", version)[case])
    assert response.status_code == 200
    reply = response.json()
    assert (reply["apiVersion"], reply["kind"]) == (version, "AdmissionReview")
    answer = reply["response"]
    assert (answer["uid"], answer["allowed"], answer["status"]["code"]) == ("uid-42", False, 400)
    assert answer["status"]["message"].startswith("bad AdmissionReview: ")
    assert len(answer["status"]["message"]) < 400 and "patch" not in answer
    assert w.state.ledger.pods() == []


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_webhook_answers_any_body_with_a_well_formed_denial(
    webhook: TestClient, body: bytes
) -> None:
    response = webhook.post("/webhook", content=body)
    assert response.status_code == 200
    reply = response.json()
    assert reply["kind"] == "AdmissionReview" and reply["apiVersion"] == "admission.k8s.io/v1"
    answer = reply["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 400
    assert isinstance(answer["uid"], str) and answer["status"]["message"]


def test_webhook_allows_updates_and_other_kinds(webhook: TestClient) -> None:
    body = review(manifest("p", gpu=1))
    body["request"]["operation"] = "UPDATE"
    assert webhook.post("/webhook", json=body).json()["response"]["allowed"] is True


# a failure inside a verb ----------------------------------------------------------------------
def test_a_failing_verb_answers_in_its_own_reply_not_with_a_500(
    extender: TestClient,
    w: World,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("disk on fire")

    for verb in ("filter", "prioritize", "bind"):
        monkeypatch.setattr(w.service, verb, boom)
    args = {"Pod": manifest("p", gpu=1), "NodeNames": ["node1"]}
    binding = {"PodName": "p", "PodNamespace": "default", "Node": "node1"}

    filtered = extender.post("/filter", json=args)
    prioritized = extender.post("/prioritize", json=args)
    bound = extender.post("/bind", json=binding)

    assert filtered.status_code == 200
    assert filtered.json()["Error"] == "internal error: disk on fire"
    assert filtered.json()["NodeNames"] is None
    assert prioritized.status_code == 400
    assert prioritized.json() == {"Error": "internal error: disk on fire"}
    assert bound.status_code == 200 and bound.json() == {"Error": "internal error: disk on fire"}
    for verb in ("filter", "prioritize", "bind"):
        assert f"{verb} failed" in caplog.text
    assert w.state.ledger.pods() == []


# health, readiness, metrics --------------------------------------------------------------------
def test_readyz_needs_sync_and_leadership(webhook: TestClient, w: World) -> None:
    assert webhook.get("/healthz").status_code == 200
    assert webhook.get("/readyz").status_code == 200
    w.runtime._leadership = type("Follower", (), {"is_leader": False})()  # type: ignore[assignment]
    response = webhook.get("/readyz")
    assert response.status_code == 503 and "not the leader" in response.text


def test_metrics_use_hami_names(extender: TestClient, scrape: TestClient, w: World) -> None:
    w.cluster.put_quota(Quota("default", "q", {"limits.nvidia.com/gpumem": "50000"}))
    body = manifest("p", gpu=1, gpumem=20000, gpucores=80)
    w.add_pod(body)
    extender.post("/filter", json={"Pod": body, "NodeNames": ["node1"]})
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(scrape.get("/metrics").text)
        for s in family.samples
    }

    def values(name: str, **labels: str) -> list[float]:
        return [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]

    assert sorted(values("hami_gpu_memory_allocated_bytes", node="node1")) == [0, 20000 * 2**20]
    assert sorted(values("hami_gpu_core_allocated_ratio")) == [0, 80]
    assert sorted(values("hami_gpu_shared_count")) == [0, 1]
    assert values("hami_gpu_memory_limit_bytes") == [46068 * 2**20] * 2
    assert values("hami_gpu_core_limit_ratio") == [100, 100]
    assert values("hami_vgpu_memory_allocated_bytes", pod="p") == [20000 * 2**20]
    assert values(
        "hami_resource_quota_used", namespace="default", quota_name="nvidia.com/gpumem"
    ) == [20000]
    assert values("hami_resource_quota_limit", namespace="default") == [50000]
    assert values("hami_scheduler_is_leader") == [1]
    assert values("vgpu_scheduler_request_duration_seconds_count", verb="filter") == [1]


# each listener serves its own routes only -----------------------------------------------------
@pytest.mark.parametrize(
    ("listener", "absent"),
    [
        ("webhook", ["/filter", "/prioritize", "/bind", "/metrics"]),
        ("extender", ["/webhook", "/readyz", "/metrics"]),
        ("scrape", ["/webhook", "/filter", "/bind", "/healthz", "/readyz", "/explain/a/b"]),
    ],
)
def test_a_listener_answers_404_for_the_routes_of_the_others(
    request: pytest.FixtureRequest, listener: str, absent: list[str]
) -> None:
    client: TestClient = request.getfixturevalue(listener)
    for path in absent:
        assert client.post(path, json={}).status_code in (404, 405), path
        assert client.get(path).status_code in (404, 405), path


def test_each_listener_serves_its_own_routes(
    webhook: TestClient, extender: TestClient, scrape: TestClient
) -> None:
    assert webhook.get("/healthz").text == "ok" and webhook.get("/readyz").text == "ok"
    assert extender.get("/healthz").text == "ok"
    assert extender.post("/filter", json={"Pod": manifest("p"), "NodeNames": []}).json()
    assert "hami_scheduler_is_leader" in scrape.get("/metrics").text


# health never waits for the verbs -------------------------------------------------------------
class Stuck:
    """A scheduler whose verbs block until released, as when the API server hangs."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def _block(self) -> None:
        self.entered.release()
        assert self.release.wait(60), "the test never released the verb"

    def filter(self, *args: object) -> Any:
        self._block()
        from vgpu.app.scheduler.service import FilterResult

        return FilterResult(error="released")

    def prioritize(self, *args: object) -> Any:
        raise NotImplementedError

    def bind(self, *args: object) -> str:
        self._block()
        return "released"

    def admit(self, *args: object) -> Any:
        self._block()
        raise RuntimeError("released")


@contextmanager
def serving(app: Any, stuck: Stuck) -> Iterator[TestClient]:
    """A client on one event loop for `app`; the stuck verbs are released before it closes."""
    with TestClient(app) as client:
        try:
            yield client
        finally:
            stuck.release.set()


def _while_blocked(
    client: TestClient, stuck: Stuck, calls: list[tuple[str, dict[str, Any]]]
) -> list[Future[Any]]:
    """Start `calls` on threads and return once every one is inside the blocked service."""
    pool = ThreadPoolExecutor(len(calls))
    futures = [pool.submit(client.post, path, json=body) for path, body in calls]
    pool.shutdown(wait=False)
    for _ in calls:
        assert stuck.entered.acquire(timeout=30), "a verb never reached the service"
    return futures


def _answered(client: TestClient, path: str) -> int:
    """The status of GET `path`; a TimeoutError (not a hung test) if it never answers."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(client.get, path).result(timeout=30).status_code
    finally:
        pool.shutdown(wait=False)


def test_healthz_answers_while_every_verb_worker_is_blocked(metrics: SchedulerMetrics) -> None:
    binding = {"PodName": "p", "PodNamespace": "default", "Node": "node1"}
    stuck = Stuck()
    with serving(extender_app(stuck, metrics, workers=2), stuck) as client:
        calls = [("/filter", {"Pod": manifest("p"), "NodeNames": ["node1"]}), ("/bind", binding)]
        verbs = _while_blocked(client, stuck, calls)
        assert _answered(client, "/healthz") == 200
        assert not any(f.done() for f in verbs)  # answered while both verbs were still stuck
        stuck.release.set()
        assert verbs[0].result(30).json()["Error"] == "released"
        assert verbs[1].result(30).json() == {"Error": "released"}


def test_readyz_and_healthz_answer_while_the_webhook_is_blocked(
    metrics: SchedulerMetrics,
) -> None:
    stuck = Stuck()
    with serving(webhook_app(stuck, metrics, lambda: "", workers=1), stuck) as client:
        [review_call] = _while_blocked(
            client, stuck, [("/webhook", review(unscheduled(manifest("p", gpu=1))))]
        )
        assert _answered(client, "/readyz") == 200
        assert _answered(client, "/healthz") == 200
        assert not review_call.done()
        stuck.release.set()
        reply = review_call.result(30).json()["response"]
        assert reply["allowed"] is False and "released" in reply["status"]["message"]
