"""A MIG-mode container's Allocate answer: the MIG instances reserved for it in
`hami.io/vgpu-mig-allocations`, made or reused by `migmanager`. `NVIDIA_VISIBLE_DEVICES` lists
their MIG UUIDs and nothing of HAMi-core is added (docs/protocol.md#mig-operating-mode).

One Allocate call keeps a `MigCall`: the instances it serves, by reservation, whose runtime
identity goes into the Allocate patch, and those it created, destroyed again when the call
fails.
"""

from dataclasses import dataclass, field

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.domain.device import MIG_MODE
from vgpu.domain.grant import ContainerGrant
from vgpu.domain.mig import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigInstance,
    MigRuntime,
    container_reservations,
    decode_mig_allocations,
    with_runtimes,
)
from vgpu.domain.pod import Container, Pod
from vgpu.ports.gpu import GpuUnavailable, MigError
from vgpu.ports.kubelet import ContainerResponse, DevicePluginError


@dataclass
class MigCall:
    """The MIG instances one Allocate call serves, by reservation, and those it created."""

    served: dict[tuple[int, int], MigInstance] = field(default_factory=dict)
    created: list[MigInstance] = field(default_factory=list)

    def runtimes(self) -> dict[tuple[int, int], MigRuntime]:
        """The runtime identity of each instance served, by (container, device)."""
        return {
            key: MigRuntime(i.mig_uuid, i.gpu_instance_id, i.compute_instance_id)
            for key, i in self.served.items()
        }


class MigServing:
    """`manager`: None where the GPU port cannot make MIG instances."""

    def __init__(self, gpus: GpuState, manager: MigManager | None) -> None:
        self._gpus = gpus
        self._manager = manager

    def in_mig_mode(self, container: str, segment: ContainerGrant) -> bool:
        """Whether the container's cards are in MIG mode here; refused when only some are."""
        cards = {g.uuid: self._gpus.card(g.uuid) for g in segment}
        mig = [u for u, card in cards.items() if card is not None and card.mode == MIG_MODE]
        shared = [u for u in cards if u not in mig]
        if mig and shared:
            raise DevicePluginError(
                f"container {container!r} is granted MIG card(s) {', '.join(mig)} and shared "
                f"card(s) {', '.join(shared)}; a container gets MIG instances or HAMi-core "
                "slices, not both"
            )
        return bool(mig)

    def answer(
        self, pod: Pod, index: int, container: Container, segment: ContainerGrant, call: MigCall
    ) -> ContainerResponse:
        """The container's reserved instances, made or reused, noted in `call`."""
        if self._manager is None:
            raise DevicePluginError(
                f"container {container.name!r} is granted MIG cards but this plugin's GPU "
                "access cannot make MIG instances"
            )
        text = pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, "")
        wanted = container_reservations(
            decode_mig_allocations(text), index, container.name, [g.uuid for g in segment]
        )
        try:
            realized = self._manager.realize(pod, wanted)
        except (MigError, GpuUnavailable) as exc:
            raise DevicePluginError(f"container {container.name!r}: {exc}") from exc
        call.created += realized.created
        for reservation, instance in zip(wanted, realized.instances, strict=True):
            call.served[reservation.key] = instance
        uuids = ",".join(i.mig_uuid for i in realized.instances)
        return ContainerResponse(envs={"NVIDIA_VISIBLE_DEVICES": uuids})

    def undo(self, call: MigCall, pod: Pod) -> None:
        """Destroy the instances a failed call made."""
        if call.created and self._manager is not None:
            self._manager.undo(call.created, pod.key)


def with_runtime(pod: Pod, call: MigCall) -> str:
    """The pod's reservations (`hami.io/vgpu-mig-allocations`) with the runtime identity of
    each instance `call` served."""
    return with_runtimes(pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, ""), call.runtimes())
