"""The fault proxy itself: each rule does what it says, over real sockets to the API emulator."""

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.faults.proxy import Action, FaultProxy, Rule
from tests.e2e.k8s_emulator import MERGE_PATCH, RunningApiServer, pod_manifest
from tests.e2e.scheduler.harness import wait_until

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture()
def proxy(k8s_api: RunningApiServer) -> Iterator[FaultProxy]:
    with FaultProxy(k8s_api.url, seed=7) as running:
        yield running


@pytest.fixture()
def client(proxy: FaultProxy) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.url, timeout=10.0) as http:
        yield http


def label(k8s_api: RunningApiServer, name: str = "p") -> str | None:
    pod = k8s_api.get(f"{PODS}/{name}")
    assert pod is not None
    found: str | None = pod["metadata"]["labels"].get("mark")
    return found


def patch(client: httpx.Client, value: str, name: str = "p") -> httpx.Response:
    body = json.dumps({"metadata": {"labels": {"mark": value}}})
    return client.patch(f"{PODS}/{name}", content=body, headers={"Content-Type": MERGE_PATCH})


@pytest.fixture()
def pod(k8s_api: RunningApiServer) -> dict[str, Any]:
    return k8s_api.create(PODS, pod_manifest("default", "p"))


def test_without_rules_requests_and_answers_pass_unchanged(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    assert patch(client, "a").status_code == 200
    assert label(k8s_api) == "a"
    answer = client.get(f"{PODS}/p")
    assert answer.status_code == 200 and answer.json()["metadata"]["labels"] == {"mark": "a"}
    created = client.post(PODS, json=pod_manifest("default", "q"))
    assert created.status_code in (200, 201) and k8s_api.get(f"{PODS}/q") is not None
    assert [s.action for s in proxy.seen] == [Action.PASS] * 3


def test_respond_answers_without_forwarding(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    proxy.add(Rule(Action.RESPOND, "PATCH", r"/pods/p$", status=503))
    answer = patch(client, "a")
    assert answer.status_code == 503
    assert answer.json()["kind"] == "Status" and answer.json()["code"] == 503
    assert label(k8s_api) is None


def test_cut_before_loses_the_call(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    proxy.add(Rule(Action.CUT_BEFORE, "PATCH", r"/pods/p$"))
    with pytest.raises(httpx.TransportError):
        patch(client, "a")
    assert label(k8s_api) is None


def test_cut_after_commits_the_call_but_loses_its_answer(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    proxy.add(Rule(Action.CUT_AFTER, "POST", r"/pods/p/binding$"))
    with pytest.raises(httpx.TransportError):
        client.post(f"{PODS}/p/binding", json={"target": {"name": "node1"}})
    stored = k8s_api.get(f"{PODS}/p")
    assert stored is not None and stored["spec"]["nodeName"] == "node1"


def test_times_bounds_a_rule_and_other_requests_are_untouched(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    rule = proxy.add(Rule(Action.RESPOND, "PATCH", r"/pods/p$", times=1, status=500))
    assert client.get(f"{PODS}/p").status_code == 200  # another method
    assert patch(client, "a").status_code == 500
    assert patch(client, "b").status_code == 200
    assert rule.hits == 1 and label(k8s_api) == "b"
    assert proxy.faults() == 1


def test_a_delayed_write_lands_after_a_later_one(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    proxy.add(Rule(Action.DELAY, "PATCH", r"/pods/p$", times=1, seconds=2.0))
    late = threading.Thread(target=patch, args=(client, "late"))
    late.start()
    assert wait_until(lambda: len(proxy.seen) == 1)
    k8s_api.merge_patch(f"{PODS}/p", {"metadata": {"labels": {"mark": "early"}}})
    assert label(k8s_api) == "early"
    assert proxy.finished(Action.DELAY) == 0
    late.join(10)
    assert label(k8s_api) == "late"
    assert wait_until(lambda: proxy.finished(Action.DELAY, r"/pods/p$") == 1)


def test_hang_forwards_nothing_until_released(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    proxy.add(Rule(Action.HANG, "PATCH", r"/pods/p$", times=1))
    answers: list[int] = []
    held = threading.Thread(target=lambda: answers.append(patch(client, "a").status_code))
    held.start()
    assert wait_until(lambda: len(proxy.seen) == 1)
    assert client.get(f"{PODS}/p").status_code == 200  # other calls go on meanwhile
    assert label(k8s_api) is None and not answers
    proxy.release()
    held.join(10)
    assert answers == [200] and label(k8s_api) == "a"


def test_a_hung_call_whose_client_gives_up_is_never_forwarded(
    proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    proxy.add(Rule(Action.HANG, "PATCH", r"/pods/p$"))
    with (
        httpx.Client(base_url=proxy.url, timeout=0.5) as impatient,
        pytest.raises(httpx.TimeoutException),
    ):
        patch(impatient, "a")
    assert wait_until(lambda: proxy.abandoned == 1)
    proxy.clear()
    assert proxy.seen[-1].action is Action.HANG
    assert label(k8s_api) is None


def test_the_same_seed_makes_the_same_choices(
    k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    def choices(seed: int) -> list[int]:
        with (
            FaultProxy(k8s_api.url, seed=seed) as proxy,
            httpx.Client(base_url=proxy.url, timeout=10.0) as http,
        ):
            proxy.add(Rule(Action.RESPOND, "GET", r"/pods/p$", probability=0.5, status=500))
            return [http.get(f"{PODS}/p").status_code for _ in range(16)]

    first = choices(3)
    assert first == choices(3)
    assert set(first) == {200, 500}


def test_watches_stream_through(
    client: httpx.Client, proxy: FaultProxy, k8s_api: RunningApiServer, pod: dict[str, Any]
) -> None:
    version = pod["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "5"}
    with client.stream("GET", PODS, params=params) as stream:
        lines = stream.iter_lines()
        k8s_api.merge_patch(f"{PODS}/p", {"metadata": {"labels": {"mark": "seen"}}})
        event = json.loads(next(line for line in lines if line.strip()))
    assert event["type"] == "MODIFIED"
    assert event["object"]["metadata"]["labels"] == {"mark": "seen"}


def test_bad_rules_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="probability"):
        Rule(Action.PASS, probability=1.5)
    with pytest.raises(ValueError, match="times"):
        Rule(Action.PASS, times=-1)
    with pytest.raises(ValueError, match="upstream"):
        FaultProxy("https://example.invalid")
