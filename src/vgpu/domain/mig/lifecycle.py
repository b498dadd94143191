"""Which MIG instances the device plugin keeps, makes, adopts and destroys
(docs/protocol.md#mig-instance-lifecycle).

The truth is the pods' `hami.io/vgpu-mig-allocations`: a reservation of an active pod (not
finished, not being deleted) is *desired*. An instance is identified by its GPU, the slice group
of its profile (`3g` of `3g.20gb`, what selects NVML's profile) and its placement: NVML names
a profile its own way (`7g.80gb`) where the allowlist may say `7g.79gb`.

The plugin *manages* the instances it made or adopted, each owned by one pod (its uid); it
destroys a managed instance once its owner no longer desires it, and touches an instance it does
not manage only when nothing could be using it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vgpu.domain.errors import DomainError
from vgpu.domain.mig.allocations import MigReservation
from vgpu.domain.mig.profiles import MigInstance, MigPlacement

MigKey = tuple[str, str, int, int]  # GPU uuid, slice group, placement start, placement size


class MigReservationError(DomainError):
    """A pod's MIG reservations cannot be served here; the message says which and why."""


def _key(gpu_uuid: str, profile: str, placement: MigPlacement) -> MigKey:
    return (gpu_uuid, profile.partition(".")[0], placement.start, placement.size)


def instance_key(instance: MigInstance) -> MigKey:
    return _key(instance.gpu_uuid, instance.profile, instance.placement)


def reservation_key(reservation: MigReservation) -> MigKey:
    return _key(reservation.gpu_uuid, reservation.profile, reservation.placement)


def describe_instance(gpu_uuid: str, profile: str, placement: MigPlacement) -> str:
    """`GPU-a 2g.10gb at 2+2`, the words every log line and refusal uses."""
    return f"GPU {gpu_uuid} {profile} at {placement.start}+{placement.size}"


@dataclass(frozen=True, slots=True)
class PodReservation:
    """A reservation of an active pod on this node."""

    pod_uid: str
    pod: str  # namespace/name, for messages
    reservation: MigReservation

    @property
    def key(self) -> MigKey:
        return reservation_key(self.reservation)


@dataclass(frozen=True, slots=True)
class Managed:
    """An instance the plugin made or adopted, and the pod it is for."""

    instance: MigInstance
    pod_uid: str
    pod: str

    @property
    def key(self) -> MigKey:
        return instance_key(self.instance)


def container_reservations(
    reservations: Iterable[MigReservation],
    container_index: int,
    container: str,
    granted: Sequence[str],
) -> tuple[MigReservation, ...]:
    """The container's reservations in device order, checked against its granted cards
    (`granted`: the GPU uuids of its grant, in order); MigReservationError when their count or
    any GPU differs."""
    mine = sorted(
        (r for r in reservations if r.container_index == container_index),
        key=lambda r: r.device_index,
    )
    if len(mine) != len(granted):
        raise MigReservationError(
            f"container {container!r} (#{container_index}) is granted {len(granted)} MIG "
            f"device(s) but hami.io/vgpu-mig-allocations reserves {len(mine)} for it"
        )
    for reservation, uuid in zip(mine, granted, strict=True):
        if reservation.gpu_uuid != uuid:
            raise MigReservationError(
                f"container {container!r}: device {reservation.device_index} is reserved on "
                f"{reservation.gpu_uuid} but granted on {uuid}"
            )
    return tuple(mine)


def to_release(managed: Iterable[Managed], desired: Iterable[PodReservation]) -> list[Managed]:
    """The managed instances whose owner no longer desires them."""
    wanted = {(r.key, r.pod_uid) for r in desired}
    return [m for m in managed if (m.key, m.pod_uid) not in wanted]


@dataclass(frozen=True, slots=True)
class StartPlan:
    """What a starting plugin does with the instances it finds."""

    adopted: list[Managed] = field(default_factory=list)
    strays: list[MigInstance] = field(default_factory=list)  # destroy: no pod can be using them
    kept: list[MigInstance] = field(default_factory=list)  # unknown, on a GPU pods use: left
    lost: list[PodReservation] = field(default_factory=list)  # runtime names no live instance


def start_plan(
    desired: Sequence[PodReservation], live: Sequence[MigInstance], mig_gpus: Iterable[str]
) -> StartPlan:
    """Adopt each live instance that a desired reservation names exactly (GPU, slice group,
    placement, MIG UUID, GPU and compute instance ids); destroy the other instances on the
    plugin's MIG GPUs (`mig_gpus`) only where no desired reservation names the GPU at all."""
    plan = StartPlan()
    taken: set[str] = set()
    for wanted in desired:
        runtime = wanted.reservation.runtime
        if runtime is None:
            continue
        match = next(
            (
                i
                for i in live
                if instance_key(i) == wanted.key
                and i.mig_uuid == runtime.mig_uuid
                and i.gpu_instance_id == runtime.gpu_instance_id
                and i.compute_instance_id == runtime.compute_instance_id
                and i.mig_uuid not in taken
            ),
            None,
        )
        if match is None:
            plan.lost.append(wanted)
            continue
        taken.add(match.mig_uuid)
        plan.adopted.append(Managed(match, wanted.pod_uid, wanted.pod))
    busy = {r.reservation.gpu_uuid for r in desired}
    served = set(mig_gpus)
    for instance in live:
        if instance.mig_uuid in taken or instance.gpu_uuid not in served:
            continue
        (plan.kept if instance.gpu_uuid in busy else plan.strays).append(instance)
    return plan


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """How to serve one reservation: reuse an instance, or clear the way and create one."""

    reuse: MigInstance | None = None
    clear: tuple[MigInstance, ...] = ()


def plan_placement(
    wanted: PodReservation,
    managed: Iterable[Managed],
    live: Iterable[MigInstance],
    desired: Iterable[PodReservation],
) -> PlacementPlan:
    """Reuse the pod's own instance with that key; otherwise the slices must be free of other
    pods' instances. An unmanaged instance there that no desired reservation names by MIG UUID
    is a leftover (a crash between create and record, an operator's idle instance): cleared.
    MigReservationError when another pod holds or may be using the slices."""
    reservation = wanted.reservation
    where = describe_instance(reservation.gpu_uuid, reservation.profile, reservation.placement)
    known = {m.instance.mig_uuid for m in managed}
    for entry in managed:
        if entry.instance.gpu_uuid != reservation.gpu_uuid:
            continue
        if entry.key == wanted.key and entry.pod_uid == wanted.pod_uid:
            return PlacementPlan(reuse=entry.instance)
        if entry.instance.placement.overlaps(reservation.placement):
            raise MigReservationError(
                f"{where}: the slices are held by MIG instance {entry.instance.mig_uuid} "
                f"({entry.instance.profile}) of pod {entry.pod}"
            )
    claimed = {
        r.reservation.runtime.mig_uuid: r for r in desired if r.reservation.runtime is not None
    }
    clear = []
    for instance in live:
        if (
            instance.mig_uuid in known
            or instance.gpu_uuid != reservation.gpu_uuid
            or not instance.placement.overlaps(reservation.placement)
        ):
            continue
        owner = claimed.get(instance.mig_uuid)
        if owner is None:
            clear.append(instance)
        elif owner.pod_uid == wanted.pod_uid and instance_key(instance) == wanted.key:
            return PlacementPlan(reuse=instance)  # recorded for this very reservation
        else:
            raise MigReservationError(
                f"{where}: the slices hold MIG instance {instance.mig_uuid}, which pod "
                f"{owner.pod} records as its own"
            )
    return PlacementPlan(clear=tuple(clear))
