"""The rules deciding which MIG instances the device plugin keeps, adopts, reuses and clears
(docs/protocol.md#mig-instance-lifecycle), without a GPU."""

import pytest

from vgpu.domain.mig import (
    Managed,
    MigInstance,
    MigPlacement,
    MigReservation,
    MigReservationError,
    MigRuntime,
    PodReservation,
    plan_placement,
    start_plan,
    to_release,
)
from vgpu.domain.mig.lifecycle import instance_key, reservation_key

GPU = "GPU-a"
FULL = MigPlacement(0, 8)


def wanted(
    uid: str, profile: str, placement: MigPlacement, runtime: MigRuntime | None = None
) -> PodReservation:
    return PodReservation(uid, f"ns/{uid}", MigReservation(0, 0, GPU, profile, placement, runtime))


def test_an_instance_nvml_names_its_own_way_is_the_reserved_one() -> None:
    nvml = MigInstance(GPU, "7g.80gb", FULL, "MIG-1", 1)
    reservation = MigReservation(0, 0, GPU, "7g.79gb", FULL)
    assert instance_key(nvml) == reservation_key(reservation)
    # same slices, another profile: not the same instance (3g and 4g both take 4 slices)
    assert instance_key(MigInstance(GPU, "4g.20gb", MigPlacement(0, 4), "MIG-2", 2)) != (
        reservation_key(MigReservation(0, 0, GPU, "3g.20gb", MigPlacement(0, 4)))
    )


def test_an_instance_is_released_when_its_owner_no_longer_reserves_it() -> None:
    instance = MigInstance(GPU, "1g.5gb", MigPlacement(0, 1), "MIG-1", 1)
    mine = Managed(instance, "uid-a", "ns/a")
    # a new pod reserving the same slices does not keep the old pod's instance alive
    assert to_release([mine], [wanted("uid-b", "1g.5gb", MigPlacement(0, 1))]) == [mine]
    assert to_release([mine], [wanted("uid-a", "1g.5gb", MigPlacement(0, 1))]) == []


def test_start_adopts_exact_matches_only_and_spares_gpus_with_reservations() -> None:
    used = MigInstance(GPU, "1g.5gb", MigPlacement(0, 1), "MIG-1", 1)
    other = MigInstance(GPU, "1g.5gb", MigPlacement(1, 1), "MIG-2", 2)
    idle = MigInstance("GPU-b", "1g.5gb", MigPlacement(0, 1), "MIG-3", 1)
    elsewhere = MigInstance("GPU-c", "1g.5gb", MigPlacement(0, 1), "MIG-4", 1)
    recorded = wanted("uid-a", "1g.5gb", MigPlacement(0, 1), MigRuntime("MIG-1", 1, 0))
    missing = wanted("uid-b", "1g.5gb", MigPlacement(2, 1), MigRuntime("MIG-9", 9, 0))

    plan = start_plan([recorded, missing], [used, other, idle, elsewhere], {GPU, "GPU-b"})

    assert plan.adopted == [Managed(used, "uid-a", "ns/uid-a")]
    assert plan.lost == [missing]
    assert plan.kept == [other]
    assert plan.strays == [idle]  # GPU-c is not one of the plugin's MIG GPUs: untouched


def test_placement_reuses_clears_or_refuses() -> None:
    mine = wanted("uid-a", "3g.20gb", MigPlacement(0, 4))
    leftover = MigInstance(GPU, "1g.5gb", MigPlacement(1, 1), "MIG-old", 3)
    assert plan_placement(mine, [], [leftover], [mine]).clear == (leftover,)

    recorded = wanted("uid-a", "3g.20gb", MigPlacement(0, 4), MigRuntime("MIG-x", 2, 0))
    own = MigInstance(GPU, "3g.20gb", MigPlacement(0, 4), "MIG-x", 2)
    assert plan_placement(mine, [], [own], [recorded]).reuse == own

    theirs = wanted("uid-b", "1g.5gb", MigPlacement(1, 1), MigRuntime("MIG-old", 3, 0))
    with pytest.raises(MigReservationError, match="MIG-old, which pod ns/uid-b records"):
        plan_placement(mine, [], [leftover], [mine, theirs])
