"""Allocate on GPUs in MIG mode (docs/protocol.md#mig): the container gets the MIG
instances the scheduler reserved for it, made at the reserved placements; the pod's
reservations gain the instances' runtime identity; anything wrong is refused and undone."""

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.device_plugin.migworld import (
    GPUS,
    MIG_A,
    MIG_B,
    PROFILES,
    SHARED,
    mig_pod,
    mig_world,
    reserve,
)
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.app.device_plugin.service import DevicePluginService
from vgpu.domain.mig import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigInstance,
    MigPlacement,
    MigReservation,
    MigRuntime,
    decode_mig_allocations,
)
from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION
from vgpu.ports.gpu import MigError
from vgpu.ports.kubelet import DevicePluginError, PreferredRequest

SMALL = "NVIDIA,4864,15:"
LARGE = "NVIDIA,19968,43:"


def test_allocate_makes_the_reserved_instance_and_answers_its_mig_uuid(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    w.put(mig_pod(f"{MIG_A},{LARGE};", [reserve(0, 0, MIG_A, "3g.20gb", 4, 4)]))

    (answer,) = w.allocator.allocate([[f"{MIG_A}-0"]])

    (made,) = w.fake.mig_instances()
    assert (made.gpu_uuid, made.profile, made.placement) == (MIG_A, "3g.20gb", MigPlacement(4, 4))
    assert answer.envs == {"NVIDIA_VISIBLE_DEVICES": made.mig_uuid}
    assert list(answer.mounts) == []
    pod = w.pod()
    (recorded,) = decode_mig_allocations(pod.annotations[MIG_ALLOCATIONS_ANNOTATION])
    assert recorded.runtime == MigRuntime(made.mig_uuid, made.gpu_instance_id, 0)
    assert pod.annotations["hami.io/bind-phase"] == "success"
    assert w.trust.problem(pod) is None  # runtime fields keep the signature valid


def test_devices_follow_the_reservations_device_order_counting_init_containers_first(
    tmp_path: Path,
) -> None:
    w = mig_world(tmp_path)
    reservations = [
        reserve(1, 1, MIG_B, "1g.5gb", 6, 1),
        reserve(1, 0, MIG_A, "1g.5gb", 0, 1),
    ]
    w.put(
        mig_pod(
            f";{MIG_A},{SMALL}{MIG_B},{SMALL};",
            reservations,
            Container("fetch", is_init=True),
            Container("main", limits={"nvidia.com/gpu": 2}),
        )
    )

    (answer,) = w.allocator.allocate([[f"{MIG_A}-0", f"{MIG_B}-0"]])

    by_gpu = {i.gpu_uuid: i for i in w.fake.mig_instances()}
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == (
        f"{by_gpu[MIG_A].mig_uuid},{by_gpu[MIG_B].mig_uuid}"
    )
    assert w.live() == [(MIG_A, "1g.5gb", 0, 1), (MIG_B, "1g.5gb", 6, 1)]


def test_an_instance_the_pod_already_has_is_reused_not_made_twice(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    pod = w.put(mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 3, 1)]))
    reservations = decode_mig_allocations(pod.annotations[MIG_ALLOCATIONS_ANNOTATION])

    first = w.mig.realize(pod, reservations)
    again = w.mig.realize(pod, reservations)

    assert again.instances == first.instances
    assert again.created == ()
    assert len(w.fake.mig_instances()) == 1


class FailingSecondCreate(FakeGpus):
    def __init__(self) -> None:
        super().__init__(GPUS, mig_profiles={MIG_A: PROFILES, MIG_B: PROFILES})
        self.creates = 0

    def create_mig_instance(
        self, gpu_uuid: str, profile: str, placement: MigPlacement
    ) -> MigInstance:
        self.creates += 1
        if self.creates == 2:
            raise MigError(f"GPU {gpu_uuid}: NVML refused (Insufficient Resources)")
        return super().create_mig_instance(gpu_uuid, profile, placement)


def test_a_failure_midway_destroys_what_the_call_made_and_fails_the_pod(tmp_path: Path) -> None:
    w = mig_world(tmp_path, fake=FailingSecondCreate())
    reservations = [reserve(0, 0, MIG_A, "1g.5gb", 0, 1), reserve(0, 1, MIG_B, "1g.5gb", 0, 1)]
    w.put(mig_pod(f"{MIG_A},{SMALL}{MIG_B},{SMALL};", reservations))

    with pytest.raises(DevicePluginError, match="Insufficient Resources"):
        w.allocator.allocate([[f"{MIG_A}-0", f"{MIG_B}-0"]])

    assert w.fake.mig_instances() == []
    assert w.mig.managed() == []
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"
    assert w.cluster.events[-1][2] == "GPUAllocationFailed"


@pytest.mark.parametrize(
    ("grants", "reservations", "problem"),
    [
        (
            f"{MIG_A},{SMALL}{MIG_B},{SMALL};",
            [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)],
            "is granted 2 MIG device(s) but hami.io/vgpu-mig-allocations reserves 1",
        ),
        (
            f"{MIG_A},{SMALL};",
            [reserve(0, 0, MIG_B, "1g.5gb", 0, 1)],
            f"gpuUUID {MIG_B} is not the granted card {MIG_A}",
        ),
        (
            f"{MIG_A},{SMALL};",
            [reserve(0, 0, MIG_A, "1g.5gb", 2, 2)],
            "invalid placement",
        ),
    ],
)
def test_reservations_that_do_not_match_the_grant_are_refused(
    tmp_path: Path, grants: str, reservations: list[MigReservation], problem: str
) -> None:
    w = mig_world(tmp_path)
    w.put(mig_pod(grants, reservations))
    devices = [f"{g.split(',')[0]}-0" for g in grants.rstrip(";").split(":") if g]

    with pytest.raises(DevicePluginError, match=re.escape(problem)):
        w.allocator.allocate([devices])

    assert w.fake.mig_instances() == []
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"


def test_reservations_altered_after_signing_are_refused(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    pod = mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)])
    forged = dict(pod.annotations)
    forged[MIG_ALLOCATIONS_ANNOTATION] = forged[MIG_ALLOCATIONS_ANNOTATION].replace(
        '"start":0', '"start":5'
    )
    w.put(replace(pod, annotations=forged))

    with pytest.raises(DevicePluginError, match="does not verify"):
        w.allocator.allocate([[f"{MIG_A}-0"]])

    assert w.fake.mig_instances() == []


def test_unsigned_reservations_are_refused(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    pod = mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)])
    bare = {k: v for k, v in pod.annotations.items() if k != GRANT_SIGNATURE_ANNOTATION}
    w.put(replace(pod, annotations=bare))

    with pytest.raises(DevicePluginError, match=r"has no vgpu\.io/grant-signature"):
        w.allocator.allocate([[f"{MIG_A}-0"]])

    assert w.fake.mig_instances() == []


def test_a_device_id_this_plugin_never_advertised_is_refused(tmp_path: Path) -> None:
    # HAMi's TestAllocate_MIG_UnknownDevice: the kubelet's count of handed-out devices is not
    # the plugin's, so nothing is served, and the pod is failed
    w = mig_world(tmp_path)
    w.put(mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)]))

    with pytest.raises(DevicePluginError, match=r"unknown device.* MIG-unknown-0"):
        w.allocator.allocate([["MIG-unknown-0"]])

    assert w.fake.mig_instances() == []
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"


def test_a_container_mixing_mig_and_shared_cards_is_refused(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    w.put(
        mig_pod(f"{MIG_A},{SMALL}{SHARED},NVIDIA,1000,10:;", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)])
    )

    with pytest.raises(DevicePluginError, match="MIG instances or HAMi-core slices, not both"):
        w.allocator.allocate([[f"{MIG_A}-0", f"{SHARED}-0"]])

    assert w.fake.mig_instances() == []


def test_slices_held_by_another_pods_instance_are_refused(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    w.put(mig_pod(f"{MIG_A},{LARGE};", [reserve(0, 0, MIG_A, "3g.20gb", 0, 4)]))
    w.allocator.allocate([[f"{MIG_A}-0"]])
    w.cluster.put_pod(replace(w.pod(), phase="Running"))
    w.put(mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 2, 1)], name="second"))

    with pytest.raises(DevicePluginError, match=r"held by MIG instance .* of pod default/train"):
        w.allocator.allocate([[f"{MIG_A}-1"]])

    assert w.live() == [(MIG_A, "3g.20gb", 0, 4)]


def test_a_leftover_instance_in_the_reserved_slices_is_cleared_first(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    leftover = w.fake.create_mig_instance(MIG_A, "1g.5gb", MigPlacement(1, 1))
    w.put(mig_pod(f"{MIG_A},{LARGE};", [reserve(0, 0, MIG_A, "3g.20gb", 0, 4)]))

    w.allocator.allocate([[f"{MIG_A}-0"]])

    assert leftover not in w.fake.mig_instances()
    assert w.live() == [(MIG_A, "3g.20gb", 0, 4)]


class WriterBeforePatch(FakeCluster):
    """Another writer changes the pod once, just before the plugin's first conditional patch."""

    def __init__(self, interfere: Callable[[FakeCluster, str, str], None]) -> None:
        super().__init__()
        self._interfere: Callable[[FakeCluster, str, str], None] | None = interfere

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> Pod:
        if resource_version is not None and self._interfere is not None:
            interfere, self._interfere = self._interfere, None
            interfere(self, namespace, name)
        return super().patch_pod_annotations(namespace, name, annotations, labels, resource_version)


def bump_status(cluster: FakeCluster, namespace: str, name: str) -> None:
    """The kubelet's status update: a new resourceVersion, the same annotations."""
    current = cluster.get_pod(namespace, name)
    assert current is not None
    cluster.put_pod(current)


def rewrite_reservations(cluster: FakeCluster, namespace: str, name: str) -> None:
    cluster.patch_pod_annotations(namespace, name, {MIG_ALLOCATIONS_ANNOTATION: "[]"})


def test_a_status_update_between_read_and_patch_does_not_fail_the_pod(tmp_path: Path) -> None:
    w = mig_world(tmp_path, cluster=WriterBeforePatch(bump_status))
    w.put(mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)]))

    w.allocator.allocate([[f"{MIG_A}-0"]])

    (recorded,) = decode_mig_allocations(w.pod().annotations[MIG_ALLOCATIONS_ANNOTATION])
    assert recorded.runtime is not None
    assert w.pod().annotations["hami.io/bind-phase"] == "success"


def test_a_conflict_over_changed_reservations_fails_and_undoes(tmp_path: Path) -> None:
    w = mig_world(tmp_path, cluster=WriterBeforePatch(rewrite_reservations))
    w.put(mig_pod(f"{MIG_A},{SMALL};", [reserve(0, 0, MIG_A, "1g.5gb", 0, 1)]))

    with pytest.raises(DevicePluginError, match="resourceVersion"):
        w.allocator.allocate([[f"{MIG_A}-0"]])

    assert w.fake.mig_instances() == []


def test_containers_served_in_separate_calls_each_record_their_instances(
    tmp_path: Path,
) -> None:
    w = mig_world(tmp_path)
    reservations = [reserve(0, 0, MIG_A, "1g.5gb", 0, 1), reserve(1, 0, MIG_B, "1g.5gb", 0, 1)]
    w.put(
        mig_pod(
            f"{MIG_A},{SMALL};{MIG_B},{SMALL};",
            reservations,
            Container("first", limits={"nvidia.com/gpu": 1}),
            Container("second", limits={"nvidia.com/gpu": 1}),
        )
    )

    (first,) = w.allocator.allocate([[f"{MIG_A}-0"]])
    w.mig.reconcile()  # the release loop between the calls keeps what the pod holds
    (second,) = w.allocator.allocate([[f"{MIG_B}-0"]])

    recorded = decode_mig_allocations(w.pod().annotations[MIG_ALLOCATIONS_ANNOTATION])
    assert [r.runtime.mig_uuid if r.runtime else None for r in recorded] == [
        first.envs["NVIDIA_VISIBLE_DEVICES"],
        second.envs["NVIDIA_VISIBLE_DEVICES"],
    ]
    assert len(w.fake.mig_instances()) == 2
    assert w.pod().annotations["hami.io/bind-phase"] == "success"


def test_one_container_gets_two_instances_on_one_gpu(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    reservations = [reserve(0, 0, MIG_A, "1g.5gb", 6, 1), reserve(0, 1, MIG_A, "3g.20gb", 0, 4)]
    w.put(
        mig_pod(
            f"{MIG_A},{SMALL}{MIG_A},{LARGE};",
            reservations,
            Container("main", limits={"nvidia.com/gpu": 2}),
        )
    )

    (answer,) = w.allocator.allocate([[f"{MIG_A}-0", f"{MIG_A}-1"]])

    assert w.live() == [(MIG_A, "1g.5gb", 6, 1), (MIG_A, "3g.20gb", 0, 4)]
    by_profile = {i.profile: i.mig_uuid for i in w.fake.mig_instances()}
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == (
        f"{by_profile['1g.5gb']},{by_profile['3g.20gb']}"
    )
    recorded = decode_mig_allocations(w.pod().annotations[MIG_ALLOCATIONS_ANNOTATION])
    assert [r.runtime.mig_uuid if r.runtime else None for r in recorded] == [
        by_profile["1g.5gb"],
        by_profile["3g.20gb"],
    ]
    assert w.pod().annotations["hami.io/bind-phase"] == "success"


def test_the_preferred_devices_are_two_replicas_of_a_gpu_granted_twice(tmp_path: Path) -> None:
    w = mig_world(tmp_path)
    reservations = [reserve(0, 0, MIG_A, "1g.5gb", 6, 1), reserve(0, 1, MIG_A, "1g.5gb", 5, 1)]
    w.put(mig_pod(f"{MIG_A},{SMALL}{MIG_A},{SMALL};", reservations))
    service = DevicePluginService(w.gpus, w.allocator, True, watch_poll_s=0)
    available = [f"{MIG_B}-0", f"{MIG_A}-0", f"{MIG_B}-1", f"{MIG_A}-1"]

    (choice,) = service.preferred_allocation([PreferredRequest(available, size=2)])

    assert choice == [f"{MIG_A}-0", f"{MIG_A}-1"]


@pytest.mark.parametrize(
    ("grants", "reservations", "problem"),
    [
        pytest.param(
            f"{SHARED},NVIDIA,1000,10:{SHARED},NVIDIA,1000,10:;",
            [],
            f"card id '{SHARED}' is already listed as container #0, card #0",
            id="a shared card twice",
        ),
        pytest.param(
            f"{MIG_A},{SMALL}{MIG_A},{SMALL};",
            [reserve(0, 0, MIG_A, "1g.5gb", 6, 1)],
            f"card id '{MIG_A}' is already listed as container #0, card #0",
            id="one reservation for two devices",
        ),
        pytest.param(
            f"{MIG_A},{SMALL}{MIG_A},{LARGE};",
            [reserve(0, 0, MIG_A, "1g.5gb", 1, 1), reserve(0, 1, MIG_A, "3g.20gb", 0, 4)],
            "their MIG reservations overlap",
            id="two reservations overlapping",
        ),
    ],
)
def test_a_gpu_named_twice_in_a_container_without_instances_of_its_own_is_refused(
    tmp_path: Path, grants: str, reservations: list[MigReservation], problem: str
) -> None:
    """Signed as the scheduler signs (a leaked key, a bug): still refused, nothing made."""
    w = mig_world(tmp_path)
    w.put(mig_pod(grants, reservations, Container("main", limits={"nvidia.com/gpu": 2})))
    uuid = grants.split(",")[0]

    with pytest.raises(DevicePluginError, match=re.escape(problem)):
        w.allocator.allocate([[f"{uuid}-0", f"{uuid}-1"]])

    assert w.fake.mig_instances() == []
