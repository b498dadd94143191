"""The scheduler's MIG grant on the wire: `hami.io/vgpu-mig-allocations` is written with the
device lists and signed with them, read back after a restart, and cleared with the grant."""

import logging

import pytest

from tests.unit.scheduler.builders import a40_node, manifest, mig_node, signed, world
from vgpu.domain import NVIDIA, MigPlacement, Usage
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION, MigReservation, decode_mig_allocations
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION

MIG = {NVIDIA.mode_annotation: "mig"}
CARD = "GPU-node1-mig0"


def mig_pod(name: str, memory: int = 9000, **kw: object) -> dict[str, object]:
    return manifest(name, annotations=dict(MIG), gpu=1, gpumem=memory, **kw)


def test_filter_writes_the_reservation_in_the_same_signed_patch_as_the_device_lists() -> None:
    w = world(mig_node())
    assert w.filter(mig_pod("p"), "node1").node_names == ["node1"]
    notes = w.pod_annotations("p")
    assert notes[NVIDIA.allocated_annotation] == f"{CARD},NVIDIA,9856,15:;"
    assert notes[NVIDIA.to_allocate_annotation] == notes[NVIDIA.allocated_annotation]
    assert decode_mig_allocations(notes[MIG_ALLOCATIONS_ANNOTATION]) == (
        MigReservation(0, 0, CARD, "1g.10gb", MigPlacement(6, 1)),
    )
    assert GRANT_SIGNATURE_ANNOTATION in notes
    assert w.usage("node1", CARD) == Usage(1, 9856, 15, mig=0b0100_0000)


def test_a_restart_restores_which_slices_are_taken() -> None:
    w = world(mig_node())
    w.filter(mig_pod("small"), "node1")
    w.filter(mig_pod("middle", 12000), "node1")
    before = w.usage("node1", CARD)
    assert before.mig == 0b0100_0011
    again = world(cluster=w.cluster)
    assert again.usage("node1", CARD) == before
    again.filter(mig_pod("next"), "node1")
    assert decode_mig_allocations(again.pod_annotations("next")[MIG_ALLOCATIONS_ANNOTATION])[
        0
    ].placement == MigPlacement(5, 1)


def test_the_device_plugins_runtime_fields_keep_the_grant_trusted() -> None:
    w = world(mig_node())
    w.filter(mig_pod("p"), "node1")
    text = w.pod_annotations("p")[MIG_ALLOCATIONS_ANNOTATION]
    realized = text[:-2] + ',"migUUID":"MIG-1","gpuInstanceID":9,"computeInstanceID":0}]'
    w.cluster.patch_pod_annotations("default", "p", {MIG_ALLOCATIONS_ANNOTATION: realized})
    assert world(cluster=w.cluster).usage("node1", CARD).mig == 0b0100_0000


def test_a_revoked_grant_loses_its_reservation_too() -> None:
    w = world(mig_node(), reservation_timeout=60)
    w.filter(mig_pod("p"), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()  # never bound: the reservation expires and the grant is cleared
    assert MIG_ALLOCATIONS_ANNOTATION not in w.pod_annotations("p")
    assert NVIDIA.allocated_annotation not in w.pod_annotations("p")
    assert w.usage("node1", CARD) == Usage()


def test_placed_again_on_a_shared_card_the_old_reservation_is_removed() -> None:
    w = world(a40_node("node1"))
    stale = '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-x","profile":"1g.10gb",'
    stale += '"placement":{"start":6,"size":1}}]'
    body = manifest(
        "p",
        annotations={NVIDIA.mode_annotation: "hami-core,mig", MIG_ALLOCATIONS_ANNOTATION: stale},
        gpu=1,
        gpumem=1000,
    )
    assert w.filter(body, "node1").node_names == ["node1"]
    assert MIG_ALLOCATIONS_ANNOTATION not in w.pod_annotations("p")
    assert len(world(cluster=w.cluster).state.ledger.pods()) == 1  # its signature verifies


def test_a_signed_grant_whose_reservation_names_another_card_is_not_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(mig_node())
    reservation = '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-elsewhere",'
    reservation += '"profile":"1g.10gb","placement":{"start":6,"size":1}}]'
    body = manifest(
        "odd",
        node="node1",
        phase="Running",
        annotations={
            "hami.io/vgpu-node": "node1",
            NVIDIA.allocated_annotation: f"{CARD},NVIDIA,9856,15:;",
            MIG_ALLOCATIONS_ANNOTATION: reservation,
        },
        gpu=1,
        gpumem=9000,
    )
    with caplog.at_level(logging.WARNING):
        w.add_pod(signed(body))
    assert w.state.ledger.allocation("default/odd") is None
    assert "pod default/odd: its GPU grant is not counted" in caplog.text
    assert "gpuUUID GPU-elsewhere is not the granted card" in caplog.text


def test_combined_scores_bind_writes_the_reservation_too() -> None:
    w = world(mig_node(), combine_scores=True)
    w.filter(mig_pod("p", 30000), "node1")
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    (reservation,) = decode_mig_allocations(w.pod_annotations("p")[MIG_ALLOCATIONS_ANNOTATION])
    assert (reservation.profile, reservation.placement) == ("3g.40gb", MigPlacement(4, 4))


def test_two_devices_of_one_container_on_one_card_are_written_and_read_back() -> None:
    w = world(mig_node())
    body = manifest("pair", annotations=dict(MIG), gpu=2, gpumem=9000)
    assert w.filter(body, "node1").node_names == ["node1"]
    notes = w.pod_annotations("pair")
    assert notes[NVIDIA.allocated_annotation] == f"{CARD},NVIDIA,9856,15:{CARD},NVIDIA,9856,15:;"
    assert decode_mig_allocations(notes[MIG_ALLOCATIONS_ANNOTATION]) == (
        MigReservation(0, 0, CARD, "1g.10gb", MigPlacement(6, 1)),
        MigReservation(0, 1, CARD, "1g.10gb", MigPlacement(5, 1)),
    )
    assert w.usage("node1", CARD) == Usage(2, 2 * 9856, 30, mig=0b0110_0000)
    assert world(cluster=w.cluster).usage("node1", CARD) == w.usage("node1", CARD)


def test_a_signed_repeat_of_one_card_without_reservations_is_not_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(mig_node())
    body = manifest(
        "twice",
        node="node1",
        phase="Running",
        annotations={
            "hami.io/vgpu-node": "node1",
            NVIDIA.allocated_annotation: f"{CARD},NVIDIA,9856,15:{CARD},NVIDIA,9856,15:;",
        },
        gpu=2,
        gpumem=9000,
    )
    with caplog.at_level(logging.WARNING):
        w.add_pod(signed(body))
    assert w.state.ledger.allocation("default/twice") is None
    assert f"card id '{CARD}' is already listed as container #0, card #0" in caplog.text
