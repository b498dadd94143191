"""Read-modify-write of node annotations: a precondition on the version read, and a fresh
read and a fresh change after every conflict."""

from typing import Any

import pytest

from tests.unit.kubernetes.test_nodelock import FakeApi
from vgpu.adapters.kubernetes.nodeupdate import update_node_annotations
from vgpu.ports.cluster import Conflict, NotFound


def test_the_change_is_computed_from_the_node_read_and_written_with_its_version() -> None:
    api = FakeApi({"count": "1"})

    update_node_annotations(
        api, "gpu-1", lambda a: {"count": str(int(a["count"]) + 1)}, lambda _: None
    )  # type: ignore[arg-type]

    assert api.patches == [{"metadata": {"resourceVersion": "7", "annotations": {"count": "2"}}}]


def test_after_a_conflict_the_node_is_read_again_and_the_change_computed_again() -> None:
    api = FakeApi({"count": "1"}, conflicts=2)
    reads: list[dict[str, Any]] = []
    sleeps: list[float] = []

    def bump(annotations: Any) -> dict[str, str | None]:
        reads.append(dict(annotations))
        return {"count": str(int(annotations["count"]) + 1)}

    update_node_annotations(api, "gpu-1", bump, sleeps.append)  # type: ignore[arg-type]

    assert len(reads) == 3 and len(sleeps) == 2
    assert api.node["metadata"]["annotations"] == {"count": "2"}


def test_nothing_to_change_writes_nothing() -> None:
    api = FakeApi({"count": "1"})
    assert update_node_annotations(api, "gpu-1", lambda _: {}, lambda _: None) is None  # type: ignore[arg-type]
    assert api.patches == []


def test_a_node_that_keeps_changing_gives_up_with_conflict_and_a_gone_one_with_not_found() -> None:
    api = FakeApi({}, conflicts=5)
    with pytest.raises(Conflict, match="gpu-1: annotations not written after 5 tries"):
        update_node_annotations(api, "gpu-1", lambda _: {"a": "b"}, lambda _: None)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        update_node_annotations(api, "gpu-9", lambda _: {"a": "b"}, lambda _: None)  # type: ignore[arg-type]
