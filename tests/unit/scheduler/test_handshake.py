"""The scheduler's node handshake pass: what it writes and when a node's GPUs drop, per HAMi
version (docs/protocol.md#node-handshake), against a fake cluster with an injected clock."""

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tests.unit.scheduler.builders import World, gpu_node, manifest, world
from vgpu.app.scheduler.handshake import NodeHandshake
from vgpu.domain import NVIDIA, ClusterNode
from vgpu.domain.handshake import HANDSHAKE_ANNOTATION, HamiVersion

T0 = datetime(2026, 8, 21, 6, 20, 39)
GPUS = "nvidia.com/gpu"


class WallClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def node(allocatable: int = 40, **annotations: str) -> ClusterNode:
    base = gpu_node("n1")
    return replace(
        base,
        annotations={**base.annotations, **annotations},
        allocatable={GPUS: str(allocatable)},
    )


def setup(
    version: HamiVersion, start: ClusterNode | None = None
) -> tuple[World, NodeHandshake, WallClock]:
    w = world(start or node())
    clock = WallClock()
    handshake = NodeHandshake(
        w.cluster, w.state, w.follower, NVIDIA, version, clock, lambda: w.leader[0]
    )
    return w, handshake, clock


def value(w: World) -> str | None:
    current = w.cluster.get_node("n1")
    assert current is not None
    return current.annotations.get(HANDSHAKE_ANNOTATION)


def set_allocatable(w: World, count: int) -> None:
    current = w.cluster.get_node("n1")
    assert current is not None
    w.cluster.put_node(replace(current, allocatable={GPUS: str(count)}))


def set_handshake(w: World, text: str) -> None:
    w.cluster.patch_node_annotations("n1", {HANDSHAKE_ANNOTATION: text})


def usable(w: World) -> bool:
    reply = w.filter(manifest(f"probe-{len(w.cluster.list_pods())}", gpu=1, gpumem=1000), "n1")
    return reply.node_names == ["n1"]


def test_v2_10_stamps_a_new_node_and_keeps_it_while_kubelet_counts_its_gpus() -> None:
    w, handshake, clock = setup(HamiVersion.V2_10)
    handshake.pass_now()
    assert value(w) == "Requesting_2026-08-21 06:20:39"
    clock.advance(120)  # the stamp is stale, but allocatable > 0: nothing happens
    handshake.pass_now()
    assert value(w) == "Requesting_2026-08-21 06:20:39"
    assert usable(w)


def test_v2_10_drops_a_node_whose_plugin_left_and_restores_it_when_it_is_back() -> None:
    w, handshake, clock = setup(HamiVersion.V2_10)
    handshake.pass_now()
    set_allocatable(w, 0)  # kubelet lost the device plugin
    clock.advance(15)
    handshake.pass_now()
    assert value(w) is None  # v2.10's clean-up removes the key
    assert w.state.ledger.nodes() == []
    reply = w.filter(manifest("p", gpu=1, gpumem=1000), "n1")
    assert reply.node_names is None
    assert "device plugin stopped reporting" in reply.failed["n1"]
    w.cluster.patch_node_annotations("n1", {"unrelated": "edit"})  # a node event alone ...
    assert not usable(w)  # ... does not bring the cards back
    set_allocatable(w, 40)
    clock.advance(15)
    handshake.pass_now()
    assert value(w) == "Requesting_2026-08-21 06:21:09"
    assert usable(w)


def test_v2_7_drops_a_node_that_did_not_answer_within_60_s_until_its_plugin_writes() -> None:
    w, handshake, clock = setup(HamiVersion.V2_7)
    handshake.pass_now()
    assert value(w) == "Requesting_2026-08-21 06:20:39"
    clock.advance(61)
    handshake.pass_now()
    assert value(w) == "Deleted_2026-08-21 06:21:40"
    assert not usable(w)
    clock.advance(60)
    handshake.pass_now()  # a `Deleted_` marker keeps the node out
    assert not usable(w)
    set_handshake(w, "Reported 2026-08-21 06:22:41.1 +0000 UTC")
    handshake.pass_now()
    assert value(w) == "Requesting_2026-08-21 06:22:40"
    assert usable(w)


def test_v2_7_keeps_a_node_whose_plugin_answers_every_stamp() -> None:
    w, handshake, clock = setup(HamiVersion.V2_7)
    for _ in range(6):
        handshake.pass_now()
        set_handshake(w, "Reported 2026-08-21 06:20:40 +0000 UTC")
        clock.advance(30)
    assert usable(w)


def test_v2_8_never_stamps_and_judges_by_allocatable_only() -> None:
    w, handshake, clock = setup(HamiVersion.V2_8)
    handshake.pass_now()
    clock.advance(600)
    handshake.pass_now()
    assert value(w) is None
    assert usable(w)
    set_allocatable(w, 0)
    handshake.pass_now()
    assert value(w) == "Deleted_2026-08-21 06:30:39"
    assert not usable(w)
    set_allocatable(w, 40)
    handshake.pass_now()
    assert usable(w)


def test_v2_9_brings_a_deleted_node_back_once_the_marker_is_60_s_old() -> None:
    w, handshake, clock = setup(HamiVersion.V2_9)
    handshake.pass_now()
    set_allocatable(w, 0)
    handshake.pass_now()
    assert value(w) == "Deleted_2026-08-21 06:20:39"
    assert not usable(w)
    clock.advance(30)
    handshake.pass_now()
    assert not usable(w)
    clock.advance(31)
    handshake.pass_now()
    assert value(w) == "Requesting_2026-08-21 06:21:40"
    assert usable(w)


@pytest.mark.parametrize("version", list(HamiVersion))
def test_a_standby_writes_nothing_but_drops_the_same_node(version: HamiVersion) -> None:
    w, handshake, clock = setup(version)
    w.leader[0] = False
    handshake.pass_now()
    assert value(w) is None
    set_allocatable(w, 0)
    clock.advance(61)
    handshake.pass_now()
    assert value(w) is None
    # a standby serves no filters: what it would offer is what its ledger holds
    if version is HamiVersion.V2_7:  # judged by the stamp only, and a standby writes none
        assert w.state.ledger.nodes() == ["n1"]
    else:
        assert w.state.ledger.nodes() == []
        assert w.state.unreported("n1") is not None


def test_v2_10_offers_a_node_with_no_gpus_counted_again_for_60_s_as_hami_does() -> None:
    w, handshake, clock = setup(HamiVersion.V2_10)
    handshake.pass_now()
    set_allocatable(w, 0)
    handshake.pass_now()
    assert not usable(w)
    clock.advance(15)
    handshake.pass_now()  # the key was removed, so it is stamped again and the node re-read
    assert value(w) == "Requesting_2026-08-21 06:20:54"
    assert usable(w)
    clock.advance(61)
    handshake.pass_now()  # the new stamp went stale with nothing counted: dropped again
    assert not usable(w)


def test_pods_on_a_dropped_node_still_count_when_it_comes_back() -> None:
    w, handshake, _clock = setup(HamiVersion.V2_10)
    w.filter(manifest("big", gpu=4, gpumem=24000), "n1")
    handshake.pass_now()
    set_allocatable(w, 0)
    handshake.pass_now()
    set_allocatable(w, 40)
    handshake.pass_now()
    assert not usable(w)  # every card is still full with `big`
    w.cluster.delete_pod("default", "big")
    assert usable(w)


def test_a_deleted_node_is_forgotten_and_a_new_one_of_that_name_starts_clean() -> None:
    w, handshake, _clock = setup(HamiVersion.V2_10)
    handshake.pass_now()
    set_allocatable(w, 0)
    handshake.pass_now()
    w.cluster.delete_node("n1")
    handshake.pass_now()
    w.cluster.put_node(node())
    assert usable(w)
    assert w.state.unreported("n1") is None


def test_an_unreadable_allocatable_counts_as_none() -> None:
    w, handshake, _clock = setup(HamiVersion.V2_8)
    handshake.pass_now()
    current = w.cluster.get_node("n1")
    assert current is not None
    w.cluster.put_node(replace(current, allocatable={GPUS: "lots"}))
    handshake.pass_now()
    assert not usable(w)
    assert w.state.unreported("n1") is not None


def test_a_node_deleted_and_created_again_is_not_dropped_before_kubelet_counts_its_gpus() -> None:
    # HAMi's NodeDeleted: the node's memory goes with the node, not at the next pass
    w, handshake, clock = setup(HamiVersion.V2_10)
    w.cluster.subscribe(handshake.handle)
    handshake.pass_now()  # remembers 40 GPUs counted on n1
    w.cluster.delete_node("n1")
    w.cluster.put_node(node(allocatable=0))  # the new n1's kubelet has counted nothing yet
    clock.advance(15)
    handshake.pass_now()
    assert w.state.unreported("n1") is None
    assert usable(w)
