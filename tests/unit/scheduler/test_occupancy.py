"""A bound pod's counted grant stays counted until it ends, across tenant edits and restarts,
from the occupancy record on its Node (issue 17)."""

import json
import logging
from dataclasses import replace
from typing import Any

import pytest

from tests.unit.scheduler.builders import (
    ALLOCATED,
    CARD,
    World,
    fits,
    hami_pod,
    manifest,
    one_card,
    placed_and_running,
    signed,
    world,
)
from vgpu.domain import Usage
from vgpu.domain.trust import OCCUPANCY_ANNOTATION, OccupancyEntry
from vgpu.domain.trust.occupancy_record import encode_occupancy_record

EDITS = {
    "signature garbled": {"vgpu.io/grant-signature": "k20260101t0000:garbled"},
    "bind-phase failed": {"hami.io/bind-phase": "failed"},
    "grant removed": {ALLOCATED: None},
    "grant lowered": {ALLOCATED: f"{CARD},NVIDIA,1,0:;"},
    "node changed": {"hami.io/vgpu-node": "node2"},
}


def record(w: World, node: str = "node1") -> dict[str, Any]:
    found = w.cluster.get_node(node)
    assert found is not None
    text = found.annotations.get(OCCUPANCY_ANNOTATION)
    return {} if text is None else dict(json.loads(text)["pods"])


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_a_tenants_edit_of_its_running_pod_frees_nothing_then_or_after_a_restart(
    edit: dict[str, str | None],
) -> None:
    w = one_card()
    placed_and_running(w, "a", 8000)
    w.cluster.patch_pod_annotations("default", "a", edit)

    assert w.usage("node1", CARD).memory == 8000
    assert not fits(w, "b", 8000)
    restarted = world(cluster=w.cluster)
    assert restarted.usage("node1", CARD).memory == 8000
    assert not fits(restarted, "c", 8000)


def test_the_bind_records_the_grant_in_the_node_lock_s_own_patch() -> None:
    w = one_card()
    assert fits(w, "a", 8000)
    assert w.service.bind("default", "a", "uid-a", "node1") == ""
    node = w.cluster.get_node("node1")
    assert node is not None and "hami.io/mutex.lock" in node.annotations
    assert record(w) == {
        "uid-a": {"pod": "default/a", "time": 1750000000, "allocated": f"{CARD},NVIDIA,8000,0:;"}
    }


def test_one_warning_per_pod_says_what_changed(caplog: pytest.LogCaptureFixture) -> None:
    w = one_card()
    placed_and_running(w, "a", 8000)
    with caplog.at_level(logging.WARNING):
        w.cluster.patch_pod_annotations("default", "a", {ALLOCATED: f"{CARD},NVIDIA,1,0:;"})
        w.cluster.patch_pod_annotations("default", "a", {"unrelated": "x"})
    warnings = [r for r in caplog.records if "no longer match" in r.getMessage()]
    assert len(warnings) == 1
    assert "default/a" in warnings[0].getMessage()
    assert f"{ALLOCATED} changed" in warnings[0].getMessage()


def test_the_warning_cuts_a_tenant_s_huge_counted_grant_short(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = one_card()
    body = hami_pod("t", 100)
    body["spec"]["schedulerName"] = "default-scheduler"  # bound by its tenant, grant its own
    huge = f"{CARD},NVIDIA,1,0;" * 10_000
    body["metadata"]["annotations"][ALLOCATED] = huge
    w.add_pod(body)
    with caplog.at_level(logging.WARNING):
        w.cluster.patch_pod_annotations("default", "t", {ALLOCATED: f"{CARD},NVIDIA,1,0:;"})
    [warning] = [r.getMessage() for r in caplog.records if "no longer match" in r.getMessage()]
    assert len(warning) < 1000 and f"({len(repr(huge))} characters)" in warning


def test_init_container_release_still_shrinks_a_counted_hold() -> None:
    w = one_card()
    grants = f"{CARD},NVIDIA,8000,0:;{CARD},NVIDIA,2000,0:;"
    body = manifest(
        "a",
        node="node1",
        phase="Running",
        annotations={"hami.io/vgpu-node": "node1", ALLOCATED: grants},
        gpu=1,
        gpumem=2000,
    )
    body["spec"]["initContainers"] = [{"name": "setup", "image": "cuda:12"}]
    body["status"]["initContainerStatuses"] = [{"name": "setup", "state": {"running": {}}}]
    w.add_pod(signed(body))
    w.cluster.patch_pod_annotations("default", "a", {"vgpu.io/grant-signature": "garbled"})
    assert w.usage("node1", CARD).memory == 8000
    body["metadata"]["annotations"]["vgpu.io/grant-signature"] = "garbled"
    body["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"exitCode": 0}}
    w.add_pod(body)
    assert w.usage("node1", CARD).memory == 2000


def test_hami_s_running_pods_count_on_default_settings_and_are_recorded() -> None:
    w = one_card()
    w.add_pod(hami_pod("h", 8000))

    assert w.usage("node1", CARD) == Usage(1, 8000, 0)
    assert not fits(w, "p", 8000)
    assert w.book.unsigned() == ["default/h"]
    assert record(w) == {}
    assert w.recorder.record_now() == 1
    assert record(w)["uid-h"]["allocated"] == f"{CARD},NVIDIA,8000,0:;"
    assert w.recorder.record_now() == 0  # nothing left to record: no write


def test_a_restart_counts_the_recorded_grant_whatever_the_pod_says_now() -> None:
    w = one_card()
    w.add_pod(hami_pod("h", 8000))
    w.recorder.record_now()
    w.cluster.patch_pod_annotations("default", "h", {ALLOCATED: None, "hami.io/vgpu-node": None})

    restarted = world(cluster=w.cluster)
    assert restarted.usage("node1", CARD) == Usage(1, 8000, 0)
    assert restarted.book.unsigned() == ["default/h"]


def test_a_standby_reads_the_leaders_record_and_agrees() -> None:
    w = one_card()
    standby = world(cluster=w.cluster, leader=False)
    w.add_pod(hami_pod("h", 8000))
    w.cluster.patch_pod_annotations("default", "h", {ALLOCATED: f"{CARD},NVIDIA,1,0:;"})
    assert standby.usage("node1", CARD) == w.usage("node1", CARD) == Usage(1, 8000, 0)
    assert standby.recorder.record_now() == 0  # only the leader writes
    w.recorder.record_now()
    late = world(cluster=w.cluster, leader=False)  # started after the edit: reads the record
    assert late.usage("node1", CARD) == Usage(1, 8000, 0)


def test_a_finished_pods_entry_leaves_at_the_recorders_next_pass() -> None:
    w = one_card()
    placed_and_running(w, "a", 4000)
    placed_and_running(w, "b", 4000)
    pod = w.cluster.get_pod("default", "a")
    assert pod is not None
    w.cluster.put_pod(replace(pod, phase="Succeeded"))
    assert w.usage("node1", CARD) == Usage(1, 4000, 0)
    assert sorted(record(w)) == ["uid-a", "uid-b"]  # the pass has not run yet

    assert w.recorder.record_now() == 1  # nothing else to record: the pass writes for "a" alone
    assert sorted(record(w)) == ["uid-b"]
    assert w.recorder.record_now() == 0


def test_a_restart_drops_the_entries_of_pods_deleted_meanwhile() -> None:
    w = one_card()
    placed_and_running(w, "a", 4000)
    w.cluster.delete_pod("default", "a")
    restarted = world(cluster=w.cluster)
    restarted.add_pod(hami_pod("h", 1000))
    restarted.recorder.record_now()
    assert sorted(record(restarted)) == ["uid-h"]


def test_a_record_that_does_not_read_is_logged_and_erases_no_counting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = one_card()
    placed_and_running(w, "a", 8000)
    with caplog.at_level(logging.WARNING):
        w.cluster.patch_node_annotations("node1", {OCCUPANCY_ANNOTATION: "{broken"})
    assert "node node1: annotation vgpu.io/occupancy: character 1: invalid JSON" in caplog.text
    assert w.usage("node1", CARD).memory == 8000
    restarted = world(cluster=w.cluster)  # the bad record is not used; the annotations are
    assert restarted.usage("node1", CARD).memory == 8000
    assert w.recorder.record_now() == 1  # the leader writes a good record again
    assert sorted(record(w)) == ["uid-a"]


def test_an_entry_that_does_not_decode_is_skipped_and_the_pod_counted_as_first_seen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = one_card()
    bad = OccupancyEntry("default/h", "1750000000", f"{CARD},NVIDIA,lots,0:;")
    w.cluster.patch_node_annotations("node1", {OCCUPANCY_ANNOTATION: encode_occupancy_record({"uid-h": bad})})
    with caplog.at_level(logging.WARNING):
        w.add_pod(hami_pod("h", 8000))
        w.cluster.patch_pod_annotations("default", "h", {"unrelated": "x"})
    assert caplog.text.count("entry of pod default/h does not read") == 1
    assert w.usage("node1", CARD).memory == 8000


def test_a_pod_whose_name_is_taken_by_a_new_pod_counts_the_new_one() -> None:
    w = one_card()
    w.add_pod(hami_pod("h", 8000))
    w.recorder.record_now()
    again = hami_pod("h", 2000)
    again["metadata"]["uid"] = "uid-h2"
    w.add_pod(again)
    assert w.usage("node1", CARD).memory == 2000


def test_rebuilding_counts_bound_grants_before_unbound_ones() -> None:
    w = one_card()
    pending = manifest(
        "x",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-time": "1750000000",
            ALLOCATED: f"{CARD},NVIDIA,6000,0:;",
        },
        gpu=1,
        gpumem=6000,
    )
    w.add_pod(signed(pending))
    w.add_pod(hami_pod("h", 6000))  # bound: counted even past the card, over capacity logged
    assert w.usage("node1", CARD).memory == 12000
    restarted = world(cluster=w.cluster)
    assert restarted.usage("node1", CARD).memory == 6000  # the bound one keeps the card
    assert restarted.state.ledger.allocation("default/h") is not None
