"""The scheduler's last decision per pod, and `GET /explain/<ns>/<name>` on its own app."""

from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.unit.domain.builders import card, container, pod
from vgpu.app.scheduler.explanations import ExplanationStore
from vgpu.app.scheduler.http import explain_app
from vgpu.domain import NodeRejection, NodeView, SchedulingConfig, Usage, plan_pod
from vgpu.domain.fit import PodPlan
from vgpu.domain.quota import UNLIMITED

NODES = [NodeView("a", (card("GPU-a", memory=24000),), {"GPU-a": Usage(1, 20000, 0)})]


def snapshot(names: Sequence[str]) -> tuple[list[NodeView], dict[str, NodeRejection]]:
    return [v for v in NODES if v.name in names], {}


def plan(name: str, memory: int) -> PodPlan:
    result = plan_pod(pod(container(gpu=1, mem=memory), name=name), SchedulingConfig())
    assert result is not None
    return result


def record(store: ExplanationStore, name: str, memory: int) -> None:
    store.record(plan(name, memory), ["a"], UNLIMITED)


def test_the_short_form_names_the_closest_card_and_what_it_lacks() -> None:
    store = ExplanationStore(snapshot)
    record(store, "big", 8000)
    found = store.explanation("default", "big")
    assert found is not None
    assert found.short_form() == (
        "closest: a: closest card GPU-a (NVIDIA A40, 24000 MiB) has 4000 MiB free, "
        "4000 MiB short of the 8000 MiB asked"
    )


def test_the_explanation_is_worked_out_on_request_with_suggestions() -> None:
    store = ExplanationStore(snapshot)
    record(store, "big", 8000)
    found = store.explanation("default", "big")
    assert found is not None and not found.fits
    assert [s.change for s in found.suggestions] == ["memory"]
    assert store.explanation("default", "other") is None


def test_only_the_last_pods_are_kept() -> None:
    store = ExplanationStore(snapshot, capacity=2)
    for name in ("p1", "p2", "p3"):
        record(store, name, 1000)
    record(store, "p2", 1000)  # seen again: now the most recent
    record(store, "p4", 1000)
    assert [n for n in ("p1", "p2", "p3", "p4") if store.explanation("default", n)] == ["p2", "p4"]


def test_each_pod_is_explained_on_the_nodes_it_was_filtered_on() -> None:
    asked: list[tuple[str, ...]] = []

    def remembering(names: Sequence[str]) -> tuple[list[NodeView], dict[str, NodeRejection]]:
        asked.append(tuple(names))
        return snapshot(names)

    store = ExplanationStore(remembering)
    store.record(plan("p1", 1000), ["a", "b"], UNLIMITED)
    store.record(plan("p2", 1000), ["a", "b"], UNLIMITED)  # kube-scheduler's usual: the same
    store.record(plan("p3", 1000), ["b"], UNLIMITED)
    store.record(plan("p4", 1000), ["a", "b", "c"], UNLIMITED)
    for name in ("p1", "p2", "p3", "p4"):
        store.explanation("default", name)
    assert asked == [("a", "b"), ("a", "b"), ("b",), ("a", "b", "c")]


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity=0"):
        ExplanationStore(snapshot, capacity=0)


def test_the_explain_app_serves_explanations_read_only() -> None:
    store = ExplanationStore(snapshot)
    record(store, "big", 8000)
    client = TestClient(explain_app(store))
    answer: Any = client.get("/explain/default/big").json()
    assert answer["pod"] == "default/big" and answer["fits"] is False
    assert answer["suggestions"][0]["change"] == "memory"
    missing = client.get("/explain/default/nobody")
    assert missing.status_code == 404
    assert "default/nobody" in missing.json()["error"]
    assert client.post("/explain/default/big").status_code == 405
