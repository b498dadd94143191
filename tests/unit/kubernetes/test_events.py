"""The Events written about pods."""

from datetime import UTC, datetime

from vgpu.adapters.kubernetes.events import MESSAGE_LIMIT, event_manifest

NOW = datetime(2026, 8, 21, 6, 20, 39, tzinfo=UTC)


def test_an_event_names_the_pod_reason_type_and_source() -> None:
    event = event_manifest(
        "ns",
        "p1",
        "FilteringFailed",
        "no node fits",
        warning=True,
        component="vgpu-scheduler",
        now=NOW,
        pod_uid="u-1",
    )
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": "p1",
        "uid": "u-1",
    }
    assert (event["reason"], event["message"], event["type"]) == (
        "FilteringFailed",
        "no node fits",
        "Warning",
    )
    assert event["source"] == {"component": "vgpu-scheduler"}
    assert event["metadata"]["namespace"] == "ns"
    assert event["metadata"]["name"] == f"p1.{1787293239 * 10**9:x}"
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-08-21T06:20:39Z"


def test_normal_events_and_long_messages_are_cut_to_the_limit() -> None:
    event = event_manifest(
        "ns", "p1", "BindingSucceed", "x" * 5000, warning=False, component="c", now=NOW
    )
    assert event["type"] == "Normal"
    assert "uid" not in event["involvedObject"]
    assert len(event["message"]) == MESSAGE_LIMIT and event["message"].endswith("...")


def test_events_a_microsecond_apart_get_different_names() -> None:
    names = {
        event_manifest(
            "ns", "p1", "R", "m", warning=False, component="c", now=NOW.replace(microsecond=us)
        )["metadata"]["name"]
        for us in (0, 1, 2)
    }
    assert len(names) == 3
