"""A tenant cannot fill a node's occupancy record to make a restart forget a pod (issue 26).

Nothing it writes is copied into the record unbounded; a grant the record has no room for is
named in its overflow, and the node takes no new grants while any pod is named there, on every
replica and after a restart, until the leader records it or it ends.
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
    world,
)
from tests.unit.scheduler.test_occupancy import record
from vgpu.domain.trust import MAX_ENTRY_BYTES, OCCUPANCY_ANNOTATION

FILLERS = 33


def overflow(w: World, node: str = "node1") -> dict[str, str]:
    found = w.cluster.get_node(node)
    assert found is not None
    text = found.annotations.get(OCCUPANCY_ANNOTATION)
    return {} if text is None else dict(json.loads(text).get("overflow", {}))


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


def test_a_grant_over_the_entry_bound_is_named_in_the_overflow_and_closes_the_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = one_card()
    assert fits(w, "before", 1000)
    huge = huge_grant()
    with caplog.at_level(logging.WARNING):
        w.add_pod(tenant_pod("t", huge))
        w.recorder.record_now()

    assert "uid-t" not in record(w) and overflow(w) == {"uid-t": "default/t"}
    assert huge not in json.dumps(record(w))
    assert "no room for the grant(s) of pod(s) default/t" in caplog.text
    why = refusal(w)
    assert "its occupancy record (vgpu.io/occupancy) could not keep the grants of 1" in why
    assert "default/t" in why and "NodeOccupancyUnrecorded" in why
    assert "node node1: its occupancy record" in caplog.text

    restarted = world(cluster=w.cluster)
    assert "could not keep the grants" in refusal(restarted)
    end(restarted, "t")
    assert restarted.recorder.record_now() == 1  # the ended pod leaves the overflow
    assert overflow(restarted) == {} and fits(restarted, "after", 1000)


def test_room_is_made_for_a_newcomer_by_naming_the_largest_entry_in_the_overflow() -> None:
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)

    assert "uid-b" in record(w)
    assert overflow(w) == {f"uid-{fillers[0]}": f"default/{fillers[0]}"}
    assert "could not keep the grants of 1 counted pod(s) (default/fill-00)" in refusal(w)


def test_the_leader_records_a_pod_it_named_in_the_overflow_once_room_is_made() -> None:
    w = one_card()
    fillers = fill(w)
    placed_and_running(w, "b", 8000)
    end(w, fillers[5])

    assert w.recorder.record_now() == 1  # drops fill-05 and records fill-00 in its room
    assert overflow(w) == {} and f"uid-{fillers[0]}" in record(w)
    assert fits(w, "c", 1000)


def test_after_a_restart_a_pod_named_in_the_overflow_is_never_recorded_from_its_annotations() -> (
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


def test_a_standby_closes_the_nodes_the_leader_closed_and_opens_them_with_it() -> None:
    w = one_card()
    standby = world(cluster=w.cluster, leader=False)
    w.add_pod(tenant_pod("t", huge_grant()))
    w.recorder.record_now()
    standby.leader[0] = True  # it would answer filter as the leader did
    assert "could not keep the grants" in refusal(standby)
    standby.leader[0] = False
    end(w, "t")
    assert standby.recorder.record_now() == 0  # only the leader writes
    w.recorder.record_now()
    standby.leader[0] = True
    assert fits(standby, "after", 1000)
