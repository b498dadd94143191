"""MIG instances go when their pod goes, and a restarted plugin takes up the instances its pods
still use (docs/protocol.md#mig-instance-lifecycle); when the pods or the served record cannot
be read every instance stays in place; a reservation nobody vouches for (unsigned, unreadable)
claims nothing, and what was served keeps its instance whatever its pod's annotations say."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.device_plugin.builders import NODE
from tests.unit.device_plugin.migworld import (
    MIG_A,
    MIG_B,
    MigWorld,
    mig_pod,
    mig_world,
    reserve,
)
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.domain.mig import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigInstance,
    MigPlacement,
    MigReservation,
    MigRuntime,
    encode_mig_allocations,
)
from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION

SMALL = "NVIDIA,4864,15:"


def allocated(w: MigWorld, name: str, gpu: str, start: int) -> Pod:
    """A pod that got a 1g.5gb instance at `start` on `gpu` and now runs."""
    w.put(mig_pod(f"{gpu},{SMALL};", [reserve(0, 0, gpu, "1g.5gb", start, 1)], name=name))
    w.allocator.allocate([[f"{gpu}-0"]])
    return w.cluster.put_pod(replace(w.pod(name), phase="Running"))


@pytest.mark.parametrize(
    "going",
    [
        lambda w, pod: w.cluster.put_pod(replace(pod, phase="Succeeded")),
        lambda w, pod: w.cluster.put_pod(replace(pod, phase="Failed")),
        lambda w, pod: w.cluster.put_pod(replace(pod, deleting=True)),
        lambda w, pod: w.cluster.delete_pod(pod.namespace, pod.name),
    ],
    ids=["succeeded", "failed", "deleting", "deleted"],
)
def test_the_instance_of_a_pod_that_goes_is_destroyed_and_others_kept(
    tmp_path: Path, going: object
) -> None:
    w = mig_world(tmp_path)
    gone = allocated(w, "gone", MIG_A, 0)
    allocated(w, "stays", MIG_B, 6)

    going(w, gone)  # type: ignore[operator]
    assert w.mig.reconcile()

    assert w.live() == [(MIG_B, "1g.5gb", 6, 1)]
    assert [m.pod for m in w.mig.managed()] == ["default/stays"]


def test_nothing_is_destroyed_while_the_pods_cannot_be_listed(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    pod = allocated(w, "gone", MIG_A, 0)
    w.cluster.delete_pod(pod.namespace, pod.name)
    w.cluster.list_pods_error = "the API server is unreachable"

    assert not w.mig.reconcile()
    assert w.live() == [(MIG_A, "1g.5gb", 0, 1)]

    w.cluster.list_pods_error = ""
    assert w.mig.reconcile()
    assert w.live() == []


def unsigned(pod: Pod, reservations: str) -> Pod:
    """`pod` with its reservations rewritten by someone without the grant key (a tenant)."""
    return replace(pod, annotations={**pod.annotations, MIG_ALLOCATIONS_ANNOTATION: reservations})


def test_a_tenants_unreadable_annotation_does_not_stall_the_release(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    gone = allocated(w, "gone", MIG_A, 0)
    w.cluster.put_pod(replace(gone, phase="Succeeded"))
    tenant = mig_pod(f"{MIG_B},{SMALL};", [], name="tenant")
    w.cluster.put_pod(unsigned(tenant, '[{"containerIndex":'))

    assert w.mig.reconcile()

    assert w.live() == []


def test_a_forged_runtime_identity_neither_adopts_nor_keeps_another_pods_instance(
    tmp_path: Path,
) -> None:
    w = mig_world(tmp_path)
    used = w.fake.create_mig_instance(MIG_A, "1g.5gb", MigPlacement(0, 1))
    thief = running_with("thief", used, identity(used))  # a copy of the owner's annotations
    forged = encode_mig_allocations(
        [MigReservation(0, 0, MIG_A, "1g.5gb", MigPlacement(0, 1), identity(used))]
    )
    w.cluster.put_pod(unsigned(replace(thief, uid="uid-another"), forged))  # listed first
    owner = w.cluster.put_pod(running_with("owner", used, identity(used)))

    assert w.mig.start()
    assert [m.pod for m in w.mig.managed()] == [owner.key]

    w.cluster.put_pod(replace(owner, phase="Succeeded"))
    assert w.mig.reconcile()
    assert w.fake.mig_instances() == []  # the thief's claim kept nothing alive


@pytest.mark.parametrize(
    "tamper",
    [
        {GRANT_SIGNATURE_ANNOTATION: "k1:garbled"},
        {MIG_ALLOCATIONS_ANNOTATION: "[]"},
        {MIG_ALLOCATIONS_ANNOTATION: '[{"containerIndex":'},
    ],
    ids=["signature-garbled", "reservations-dropped", "reservations-unreadable"],
)
def test_a_tenant_editing_its_served_pod_keeps_its_instance_until_the_pod_ends(
    tmp_path: Path, tamper: dict[str, str]
) -> None:
    w = mig_world(tmp_path)
    pod = allocated(w, "train", MIG_A, 0)
    w.cluster.put_pod(replace(pod, annotations={**pod.annotations, **tamper}))

    assert w.mig.reconcile()
    assert w.live() == [(MIG_A, "1g.5gb", 0, 1)]  # the served record still vouches for it
    assert [m.pod for m in w.mig.managed()] == ["default/train"]

    w.cluster.put_pod(replace(w.pod("train"), phase="Succeeded"))
    assert w.mig.reconcile()
    assert w.live() == []


def running_with(name: str, instance: MigInstance, runtime: MigRuntime | None) -> Pod:
    """A running pod whose reservation names `instance`'s slices, with `runtime` recorded."""
    reservation = MigReservation(
        0, 0, instance.gpu_uuid, instance.profile, instance.placement, runtime
    )
    pod = mig_pod(f"{instance.gpu_uuid},{SMALL};", [reservation], name=name, phase="Running")
    annotations = {
        **pod.annotations,
        MIG_ALLOCATIONS_ANNOTATION: encode_mig_allocations([reservation]),
    }
    return replace(pod, annotations=annotations)


def identity(instance: MigInstance) -> MigRuntime:
    return MigRuntime(instance.mig_uuid, instance.gpu_instance_id, instance.compute_instance_id)


def test_start_adopts_recorded_instances_and_destroys_only_on_gpus_no_pod_uses(
    tmp_path: Path,
) -> None:
    w = mig_world(tmp_path)
    used = w.fake.create_mig_instance(MIG_A, "1g.5gb", MigPlacement(0, 1))
    unknown_beside = w.fake.create_mig_instance(MIG_A, "1g.5gb", MigPlacement(1, 1))
    stray = w.fake.create_mig_instance(MIG_B, "3g.20gb", MigPlacement(0, 4))
    w.cluster.put_pod(running_with("user", used, identity(used)))

    assert w.mig.start()

    assert [(m.pod, m.instance) for m in w.mig.managed()] == [("default/user", used)]
    assert stray not in w.fake.mig_instances()
    assert unknown_beside in w.fake.mig_instances()  # its GPU serves a pod: left alone


def test_an_adopted_instance_is_released_when_its_pod_goes(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    used = w.fake.create_mig_instance(MIG_A, "1g.5gb", MigPlacement(0, 1))
    pod = w.cluster.put_pod(running_with("user", used, identity(used)))
    assert w.mig.start()

    w.cluster.put_pod(replace(pod, phase="Succeeded"))
    assert w.mig.reconcile()

    assert w.fake.mig_instances() == []


def test_a_recorded_identity_that_does_not_match_is_not_adopted(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    used = w.fake.create_mig_instance(MIG_A, "1g.5gb", MigPlacement(0, 1))
    wrong = MigRuntime(used.mig_uuid, used.gpu_instance_id + 5, 0)
    w.cluster.put_pod(running_with("user", used, wrong))

    assert w.mig.start()

    assert w.mig.managed() == []
    assert w.fake.mig_instances() == [used]  # its GPU is reserved: never destroyed at start


def pods_unlisted(w: MigWorld, problem: str) -> None:
    w.cluster.list_pods_error = problem


def record_unreadable(w: MigWorld, problem: str) -> None:
    w.record.read_error = problem


@pytest.mark.parametrize(
    "unreadable", [pods_unlisted, record_unreadable], ids=["pods", "served-record"]
)
def test_start_destroys_nothing_while_what_it_judges_by_cannot_be_read(
    tmp_path: Path, unreadable: Callable[[MigWorld, str], None]
) -> None:
    w = mig_world(tmp_path)
    unreadable(w, "it cannot be read")
    stray = w.fake.create_mig_instance(MIG_B, "3g.20gb", MigPlacement(0, 4))

    assert not w.mig.start()
    assert not w.mig.reconcile()
    assert w.fake.mig_instances() == [stray]

    unreadable(w, "")
    assert w.mig.reconcile()
    assert w.fake.mig_instances() == []


@pytest.mark.parametrize(
    "tamper",
    [
        {GRANT_SIGNATURE_ANNOTATION: "k1:garbled"},
        {MIG_ALLOCATIONS_ANNOTATION: "[]"},
    ],
    ids=["signature-garbled", "reservations-dropped"],
)
def test_a_restarted_plugin_takes_up_a_tampered_pods_instance_and_frees_it_when_the_pod_ends(
    tmp_path: Path, tamper: dict[str, str]
) -> None:
    w = mig_world(tmp_path)
    pod = allocated(w, "train", MIG_A, 0)
    w.cluster.put_pod(replace(pod, annotations={**pod.annotations, **tamper}))
    restarted = MigManager(w.fake, w.cluster, NODE, w.gpus, w.trust, ServedRecord(w.record, NODE))

    assert restarted.start()
    assert [m.pod for m in restarted.managed()] == ["default/train"]

    w.cluster.put_pod(replace(w.pod("train"), phase="Succeeded"))
    assert restarted.reconcile()
    assert w.live() == []  # not left behind on the GPU once its pod has ended


def test_the_instances_of_containers_served_in_separate_calls_are_all_taken_up_after_a_restart(
    tmp_path: Path,
) -> None:
    w = mig_world(tmp_path)
    reservations = [reserve(0, 0, MIG_A, "1g.5gb", 0, 1), reserve(1, 0, MIG_B, "1g.5gb", 0, 1)]
    grants = f"{MIG_A},{SMALL};{MIG_B},{SMALL};"
    two = (
        Container("first", limits={"nvidia.com/gpu": 1}),
        Container("second", limits={"nvidia.com/gpu": 1}),
    )
    w.put(mig_pod(grants, reservations, *two))
    w.allocator.allocate([[f"{MIG_A}-0"]])
    w.allocator.allocate([[f"{MIG_B}-0"]])
    pod = w.pod()
    w.cluster.put_pod(
        replace(pod, annotations={**pod.annotations, MIG_ALLOCATIONS_ANNOTATION: "[]"})
    )
    restarted = MigManager(w.fake, w.cluster, NODE, w.gpus, w.trust, ServedRecord(w.record, NODE))

    assert restarted.start()

    assert sorted(m.instance.gpu_uuid for m in restarted.managed()) == [MIG_A, MIG_B]
