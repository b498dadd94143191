"""A tenant cannot fill a node's occupancy record to make a restart forget a pod, nor close
the node to others while its pods carry the grants they were counted with.

Nothing it writes is copied into the record unbounded; a grant the record has no room for is
named in its overflow with its entry's digest. A replica that finds the pod's annotations still
carrying that grant counts it as the record would; one that does not (the tenant edited them
before that replica first counted the pod) takes no new grants on the node until the leader
records the pod or it ends.
"""

import json
import logging
from dataclasses import replace
from typing import Any

import pytest

from tests.record_filler import filler_item_bytes, phantom_grant
from tests.unit.scheduler.builders import (
    ALLOCATED,
    CARD,
    World,
    fits,
    hami_pod,
    manifest,
    one_card,
    placed_and_running,
    start,
    world,
)
from tests.unit.scheduler.test_occupancy import record
from vgpu.domain.trust import MAX_ENTRY_BYTES, OCCUPANCY_ANNOTATION

FILLERS = 33


def overflow(w: World, node: str = "node1") -> dict[str, str]:
    """uid -> namespace/name of the pods the node's record names in its overflow."""
    found = w.cluster.get_node(node)
    assert found is not None
    text = found.annotations.get(OCCUPANCY_ANNOTATION)
    names = {} if text is None else json.loads(text).get("overflow", {})
    return {uid: name["pod"] for uid, name in names.items()}


def tenant_pod(name: str, allocated: str, time: str = "1750000000") -> dict[str, Any]:
    """A pod its tenant bound to node1 itself, with grant annotations of its own making."""
    body = hami_pod(name, 100)
    body["spec"]["schedulerName"] = "default-scheduler"
    body["metadata"]["annotations"].update({"hami.io/vgpu-time": time, ALLOCATED: allocated})
    return body


def fill(w: World) -> list[str]:
    """Tenant pods whose grants, on cards node1 does not have, leave less room in the record
    than one more entry needs; each entry is within its own bound."""
    names = [f"fill-{i:02}" for i in range(FILLERS)]
    each = filler_item_bytes(FILLERS, room=60)
    for name in names:
        w.add_pod(tenant_pod(name, phantom_grant(name, f"uid-{name}", each)))
    w.recorder.record_now()
    assert sorted(record(w)) == [f"uid-{n}" for n in names] and overflow(w) == {}
    return names


def huge_grant() -> str:
    """A device list on node1's card, padded past the bound of one entry."""
    return f"{CARD},NVIDIA,100,0:" + phantom_grant("t", "uid-t", MAX_ENTRY_BYTES)


def end(w: World, name: str) -> None:
    pod = w.cluster.get_pod("default", name)
    assert pod is not None
    w.cluster.put_pod(replace(pod, phase="Succeeded"))


def refusal(w: World, name: str = "probe") -> str:
    """Why filter refuses node1 to a 1000 MiB pod (it must)."""
    reply = w.filter(manifest(name, gpu=1, gpumem=1000), "node1")
    assert not reply.node_names, reply
    return str(reply.failed["node1"])


def test_a_huge_vgpu_time_is_not_copied_into_the_record() -> None:
    w = one_card()
    w.add_pod(tenant_pod("t", f"{CARD},NVIDIA,100,0:;", time="1" * 130_851))
    w.recorder.record_now()
    placed_and_running(w, "b", 8000)

    assert record(w)["uid-t"] == {"allocated": f"{CARD},NVIDIA,100,0:;", "pod": "default/t"}
    assert record(w)["uid-b"]["time"] == 1750000000
    assert len(json.dumps(record(w))) < 400
    w.cluster.patch_pod_annotations("default", "b", {ALLOCATED: None})
    assert world(cluster=w.cluster).usage("node1", CARD).memory == 8100


def test_a_grant_over_the_entry_bound_is_named_in_the_overflow_and_closes_no_node_as_it_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = one_card()
    huge = huge_grant()
    with caplog.at_level(logging.WARNING):
        w.add_pod(tenant_pod("t", huge))
        w.recorder.record_now()

    assert "uid-t" not in record(w) and overflow(w) == {"uid-t": "default/t"}
    assert huge not in w.cluster.get_node("node1").annotations[OCCUPANCY_ANNOTATION]  # type: ignore[union-attr]
    assert "no room for the grant(s) of pod(s) default/t (it would be 4" in caplog.text
    restarted = world(cluster=w.cluster)
    assert restarted.usage("node1", CARD).memory == 100  # t's, counted from its annotations
    assert fits(w, "probe", 1000) and fits(restarted, "probe2", 1000)


def test_a_pod_named_in_the_overflow_whose_tenant_edits_it_closes_the_node_after_a_restart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = one_card()
    w.add_pod(tenant_pod("t", huge_grant()))
    w.recorder.record_now()
    w.cluster.patch_pod_annotations("default", "t", {ALLOCATED: f"{CARD},NVIDIA,1,0:;"})
    assert fits(w, "probe", 1000)  # this replica counted t's grant before the edit

    with caplog.at_level(logging.WARNING):
        restarted = world(cluster=w.cluster)
    why = refusal(restarted)
    assert "its occupancy record (vgpu.io/occupancy) could not keep the grants of 1" in why
    assert "default/t" in why and "NodeOccupancyUnrecorded" in why
    assert "node node1: its occupancy record" in caplog.text
    end(restarted, "t")
    assert fits(restarted, "after", 1000)  # an ended pod holds nothing
    assert restarted.recorder.record_now() == 1  # and leaves the overflow
    assert overflow(restarted) == {}


def test_a_vgpu_placed_pod_of_many_gpu_init_containers_closes_no_node() -> None:
    """200 init containers, each a 10 MiB slice of the same card, hold one slice at a time but
    make a 5 KB grant: over one entry's bound, into the overflow, and the node stays open to
    other tenants on the leader and after a restart."""
    w = one_card()
    body = manifest("t", gpu=1, gpumem=10)
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}
    body["spec"]["initContainers"] = [
        {"name": f"init{i}", "image": "cuda:12", "resources": {"limits": limits}}
        for i in range(200)
    ]
    assert w.filter(body, "node1").node_names == ["node1"]
    assert w.service.bind("default", "t", "uid-t", "node1") == ""
    w.cluster.release_node_lock("node1", "default", "t")
    start(w, "t")
    w.recorder.record_now()

    assert overflow(w) == {"uid-t": "default/t"}
    assert fits(w, "other", 8000)
    restarted = world(cluster=w.cluster)
    assert restarted.usage("node1", CARD).memory == 8010
    assert not fits(restarted, "too-big", 2000) and fits(restarted, "small", 1000)


def test_room_is_made_for_a_newcomer_by_naming_the_largest_entry_in_the_overflow() -> None:
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)

    assert "uid-b" in record(w)
    assert overflow(w) == {f"uid-{fillers[0]}": f"default/{fillers[0]}"}
    assert fits(w, "c", 1000) and fits(world(cluster=w.cluster), "d", 1000)


def test_the_leader_records_a_pod_it_named_in_the_overflow_once_room_is_made() -> None:
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)
    end(w, fillers[5])

    assert w.recorder.record_now() == 1  # drops fill-05 and records fill-00 in its room
    assert overflow(w) == {} and f"uid-{fillers[0]}" in record(w)
    assert fits(w, "c", 1000)


def test_after_a_restart_a_pod_named_in_the_overflow_is_recorded_only_with_its_counted_grant() -> (
    None
):
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)
    w.cluster.patch_pod_annotations("default", fillers[0], {ALLOCATED: f"{CARD},NVIDIA,1,0:;"})
    restarted = world(cluster=w.cluster)
    end(restarted, fillers[5])

    restarted.recorder.record_now()  # room now, but its grant is unknown: its edit is not recorded
    assert overflow(restarted) == {f"uid-{fillers[0]}": f"default/{fillers[0]}"}
    assert "could not keep the grants" in refusal(restarted)
    end(restarted, fillers[0])
    restarted.recorder.record_now()
    assert overflow(restarted) == {} and fits(restarted, "c", 1000)


def test_after_a_restart_an_unedited_pod_named_in_the_overflow_is_recorded_once_there_is_room() -> (
    None
):
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)
    restarted = world(cluster=w.cluster)
    end(restarted, fillers[5])

    restarted.recorder.record_now()
    assert overflow(restarted) == {} and f"uid-{fillers[0]}" in record(restarted)


def test_a_standby_that_first_saw_the_pod_edited_closes_the_node_until_the_leader_records_it() -> (
    None
):
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)
    w.cluster.patch_pod_annotations("default", fillers[0], {ALLOCATED: f"{CARD},NVIDIA,1,0:;"})
    standby = world(cluster=w.cluster, leader=False)
    standby.leader[0] = True  # it would answer filter as the leader would not
    assert "could not keep the grants" in refusal(standby)
    assert fits(w, "c", 1000)
    standby.leader[0] = False
    end(w, fillers[5])
    assert standby.recorder.record_now() == 0  # only the leader writes
    w.recorder.record_now()  # the leader knows the grant: it records it in the room made
    standby.leader[0] = True
    assert fits(standby, "after", 1000)
