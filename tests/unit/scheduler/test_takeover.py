"""Taking a cluster over from HAMi: its pending pods' grants reserve their cards with
`takeover.from_hami`, and the exit check says how many bound pods are counted unsigned."""

import logging
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.scheduler.builders import (
    ALLOCATED,
    CARD,
    World,
    fits,
    gpu_node,
    hami_pod,
    placed_and_running,
    world,
)
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.takeover import TakeoverReport

TAKEOVER = {"takeover": {"from_hami": True}}


def hami_pending(name: str, memory: int) -> dict[str, Any]:
    """A pod HAMi's scheduler has placed (its grant is written) but not bound yet."""
    body = hami_pod(name, memory)
    del body["spec"]["nodeName"]
    body["status"]["phase"] = "Pending"
    return body


@pytest.mark.parametrize(
    ("settings", "reserved"),
    [
        ({}, False),
        (TAKEOVER, True),
        ({**TAKEOVER, "signing": {"enabled": False}}, True),
        ({"signing": {"enabled": False}}, False),
    ],
)
def test_hamis_pending_pods_reserve_their_cards_only_while_taking_over(
    settings: dict[str, Any], reserved: bool
) -> None:
    w = world(gpu_node("node1", cards=1, memory=10000), **settings)
    w.add_pod(hami_pending("h", 8000))
    assert fits(w, "p", 8000) is not reserved


@pytest.mark.parametrize("vgpus_pod", ["bound and running", "granted, not bound yet"])
def test_a_grant_hamis_scheduler_writes_onto_a_card_vgpu_just_gave_is_revoked(
    vgpus_pod: str,
) -> None:
    # both schedulers place pods during a takeover; HAMi's binds without re-checking, so its
    # late grant must go before HAMi's device plugin serves it
    w = world(gpu_node("node1", cards=1, memory=10000), **TAKEOVER)
    if vgpus_pod == "bound and running":
        placed_and_running(w, "x", 6000)
    else:
        assert fits(w, "x", 6000)
    w.add_pod(hami_pending("h", 6000))

    assert w.usage("node1", CARD).memory == 6000
    assert w.late_grants.settle() == 1
    assert ALLOCATED not in w.pod_annotations("h")
    if vgpus_pod == "granted, not bound yet":
        assert w.service.bind("default", "x", "uid-x", "node1") == ""


def test_another_schedulers_pending_grants_are_not_believed_while_taking_over() -> None:
    w = world(gpu_node("node1", cards=1, memory=10000), **TAKEOVER)
    body = hami_pending("h", 8000)
    body["spec"]["schedulerName"] = "volcano"
    w.add_pod(body)
    assert fits(w, "p", 8000)


def unsigned_gauge(w: World) -> float:
    metrics = SchedulerMetrics(
        w.state, w.config.vendor(), lambda: True, unsigned_counted=lambda: len(w.book.unsigned())
    )
    for family in text_string_to_metric_families(metrics.render().decode()):
        if family.name == "vgpu_unsigned_grants_counted":
            return float(family.samples[0].value)
    raise AssertionError("vgpu_unsigned_grants_counted not published")


def test_the_gauge_and_the_log_line_count_bound_pods_without_a_trusted_grant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(gpu_node("node1", cards=2, memory=10000))
    report = TakeoverReport(w.book, Fence(lambda: True))
    placed_and_running(w, "ours", 1000)
    w.add_pod(hami_pod("h", 8000))
    w.add_pod(hami_pod("h2", 2000, card="GPU-node1-1"))
    w.cluster.patch_pod_annotations("default", "ours", {"vgpu.io/grant-signature": "garbled"})
    assert unsigned_gauge(w) == 3

    with caplog.at_level(logging.INFO):
        report.report()
        for name in ("h", "h2", "ours"):
            w.cluster.delete_pod("default", name)
        report.report()
        report.report()
    lines = [r.getMessage() for r in caplog.records if "takeover check" in r.getMessage()]
    assert len(lines) == 2
    assert "3 bound pod(s)" in lines[0] and "default/h, default/h2, default/ours" in lines[0]
    assert "when this is 0, HAMi's pods are gone and signing can be enforced" in lines[0]
    assert "every bound pod counted has a signed grant" in lines[1]
    assert unsigned_gauge(w) == 0


def test_the_report_is_the_leaders_alone(caplog: pytest.LogCaptureFixture) -> None:
    w = world(gpu_node("node1", cards=1, memory=10000))
    w.add_pod(hami_pod("h", 8000))
    with caplog.at_level(logging.INFO):
        TakeoverReport(w.book, Fence(lambda: False)).report()
    assert "takeover check" not in caplog.text


def test_a_pod_whose_signed_grant_is_edited_back_counts_as_trusted_again() -> None:
    w = world(gpu_node("node1", cards=1, memory=10000))
    placed_and_running(w, "ours", 1000)
    allocated = f"{CARD},NVIDIA,1000,0:;"
    w.cluster.patch_pod_annotations("default", "ours", {ALLOCATED: f"{CARD},NVIDIA,5,0:;"})
    assert w.book.unsigned() == ["default/ours"]
    w.cluster.patch_pod_annotations("default", "ours", {ALLOCATED: allocated})
    assert w.book.unsigned() == []


def test_hamis_running_pods_count_as_unsigned_while_taken_over_too() -> None:
    w = world(gpu_node("node1", cards=1, memory=10000), **TAKEOVER)
    w.add_pod(hami_pod("h", 8000))
    placed_and_running(w, "ours", 1000)
    assert w.book.unsigned() == ["default/h"]
