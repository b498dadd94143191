"""The realized MIG instances of a pod, from `hami.io/vgpu-mig-allocations`
(docs/protocol.md#mig-allocations).

The annotation is a JSON array with one object per MIG device; the scheduler writes
`containerIndex` (init containers first), `deviceIndex`, `gpuUUID`, `profile` and `placement`,
and the device plugin adds `migUUID`, `gpuInstanceID` and `computeInstanceID` once it has
created the instance. Only entries with the three runtime fields count as realized.
"""

import logging
from dataclasses import dataclass

from vgpu.domain.errors import CodecError
from vgpu.domain.mig import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigReservation,
    MigRuntime,
    decode_mig_allocations,
)
from vgpu.domain.pod import Pod

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ContainerMigDevice:
    """A MIG device of one of the pod's containers, as the device plugin realized it."""

    container: str
    device_index: int
    gpu_uuid: str
    profile: str
    mig_uuid: str
    gpu_instance: int
    compute_instance: int


def realized_instances(pod: Pod) -> list[ContainerMigDevice]:
    """The pod's realized MIG instances; an annotation that does not read by HAMi's rules
    (`vgpu.domain.mig.allocations`) is logged and gives none, as HAMi's monitor skips it."""
    try:
        reservations = decode_mig_allocations(pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, ""))
        return [
            _instance(pod, reservation, reservation.runtime)
            for reservation in reservations
            if reservation.runtime is not None
        ]
    except (CodecError, ValueError) as err:
        log.warning("pod %s: ignoring annotation %s: %s", pod.key, MIG_ALLOCATIONS_ANNOTATION, err)
        return []


def _instance(pod: Pod, reservation: MigReservation, runtime: MigRuntime) -> ContainerMigDevice:
    index = reservation.container_index
    if index >= len(pod.containers):
        raise ValueError(f"containerIndex {index} names no container of the pod")
    return ContainerMigDevice(
        container=pod.containers[index].name,
        device_index=reservation.device_index,
        gpu_uuid=reservation.gpu_uuid,
        profile=reservation.profile,
        mig_uuid=runtime.mig_uuid,
        gpu_instance=runtime.gpu_instance_id,
        compute_instance=runtime.compute_instance_id,
    )
