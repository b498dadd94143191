"""What differs between GPU vendors: resource names, annotation keys and the type word.

A second vendor is a second `Vendor` value, not a code fork.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Vendor:
    """Names one vendor uses on the wire (HAMi's contract for NVIDIA by default)."""

    word: str = "NVIDIA"
    count_resource: str = "nvidia.com/gpu"
    memory_resource: str = "nvidia.com/gpumem"
    memory_percentage_resource: str = "nvidia.com/gpumem-percentage"
    cores_resource: str = "nvidia.com/gpucores"
    priority_resource: str = "nvidia.com/priority"
    register_annotation: str = "hami.io/node-nvidia-register"
    to_allocate_annotation: str = "hami.io/vgpu-devices-to-allocate"
    allocated_annotation: str = "hami.io/vgpu-devices-allocated"
    use_type_annotation: str = "nvidia.com/use-gputype"
    nouse_type_annotation: str = "nvidia.com/nouse-gputype"
    use_uuid_annotation: str = "nvidia.com/use-gpuuuid"
    nouse_uuid_annotation: str = "nvidia.com/nouse-gpuuuid"
    numa_bind_annotation: str = "nvidia.com/numa-bind"
    mode_annotation: str = "nvidia.com/vgpu-mode"
    cordon_annotation: str = "hami.io/device-cordon"

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource name that marks a container as a GPU user."""
        return (
            self.count_resource,
            self.memory_resource,
            self.memory_percentage_resource,
            self.cores_resource,
        )


NVIDIA = Vendor()
"""NVIDIA's resource and annotation names, as HAMi uses them; the default everywhere."""

# Pod annotations shared by every vendor (HAMi's pkg/util/types.go).
NODE_POLICY_ANNOTATION = "hami.io/node-scheduler-policy"
GPU_POLICY_ANNOTATION = "hami.io/gpu-scheduler-policy"
ASSIGNED_NODE_ANNOTATION = "hami.io/vgpu-node"
ASSIGNED_TIME_ANNOTATION = "hami.io/vgpu-time"
BIND_PHASE_ANNOTATION = "hami.io/bind-phase"
BIND_TIME_ANNOTATION = "hami.io/bind-time"
NODE_LOCK_ANNOTATION = "hami.io/mutex.lock"
# The pod label HAMi's scheduler sets to the chosen node (its monitor counts labelled pods only)
ASSIGNED_NODE_LABEL = "hami.io/vgpu-node"
