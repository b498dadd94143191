"""What the device plugin hands a container: HAMi-core envs, mounts and visible devices.

Follows HAMi's Allocate response (docs/protocol.md#hami-core-environment-and-mounts). One fix: a
container's own `CUDA_DISABLE_CONTROL=true` drops the `ld.so.preload` mount only in namespaces the
node config trusts; HAMi honours it everywhere, so any tenant can switch its limits off.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from vgpu.domain.grant import ContainerGrant, granted_uuids

_TRUE = {"1", "t", "true", "y", "yes", "on"}


@dataclass(frozen=True, slots=True)
class Mount:
    """A host path bind-mounted into the container: HAMi-core's library, the directory of the
    container's shared usage region, the lock directory."""

    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class AllocationConfig:
    """Node-level settings of the device plugin that shape every Allocate answer."""

    hook_path: str = "/usr/local"
    memory_scaling: float = 1.0
    disable_core_limit: bool = False
    cuda_log_level: str = ""
    disable_control_namespaces: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class AllocationInput:
    """Facts of one Allocate call that the domain cannot look up itself."""

    pod_uid: str
    namespace: str
    container: str
    cache_id: str  # a fresh random id for HAMi-core's shared region file
    container_env: Mapping[str, str] = field(default_factory=dict)
    priority: int | None = None
    libvgpu_host_path: str = ""  # default: <hook>/vgpu/libvgpu.so
    license_present: bool = False


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """The device plugin's answer for one container: the envs HAMi-core reads (visible cards,
    memory and core limits, ...), the mounts, and notes worth a log line."""

    envs: dict[str, str]
    mounts: tuple[Mount, ...]
    notes: tuple[str, ...] = ()  # things worth a log line, e.g. a refused CUDA_DISABLE_CONTROL


def allocate_container(
    grants: ContainerGrant, call: AllocationInput, config: AllocationConfig
) -> ContainerAllocation:
    """Envs and mounts for one container that was granted `grants`."""
    if not grants:
        raise ValueError(f"container {call.container!r} has no granted cards to allocate")
    vgpu_dir = f"{config.hook_path}/vgpu"
    envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(granted_uuids([grants]))}
    for i, grant in enumerate(grants):
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{grant.memory}m"
    envs["CUDA_DEVICE_SM_LIMIT"] = str(grants[0].cores)
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{vgpu_dir}/{call.cache_id}.cache"
    if config.memory_scaling > 1:
        envs["CUDA_OVERSUBSCRIBE"] = "true"
    if call.priority is not None:
        envs["CUDA_TASK_PRIORITY"] = str(call.priority)
    if config.disable_core_limit:
        envs["GPU_CORE_UTILIZATION_POLICY"] = "disable"
    if config.cuda_log_level:
        envs["LIBCUDA_LOG_LEVEL"] = config.cuda_log_level

    mounts = [
        Mount(f"{vgpu_dir}/libvgpu.so", call.libvgpu_host_path or f"{vgpu_dir}/libvgpu.so", True),
        Mount(vgpu_dir, f"{vgpu_dir}/containers/{call.pod_uid}_{call.container}", False),
        Mount("/tmp/vgpulock", "/tmp/vgpulock", False),
    ]
    notes: list[str] = []
    wants_off = call.container_env.get("CUDA_DISABLE_CONTROL", "").strip().lower() in _TRUE
    if wants_off and call.namespace in config.disable_control_namespaces:
        notes.append(f"CUDA_DISABLE_CONTROL honoured for {call.namespace}/{call.container}")
    else:
        if wants_off:
            notes.append(
                f"CUDA_DISABLE_CONTROL ignored for {call.namespace}/{call.container}: "
                f"namespace {call.namespace} is not allowed to disable GPU limits"
            )
        mounts.append(Mount("/etc/ld.so.preload", f"{vgpu_dir}/ld.so.preload", True))
    if call.license_present:
        mounts.append(Mount("/tmp/license", f"{vgpu_dir}/license", True))
        mounts.append(Mount("/usr/bin/vgpuvalidator", f"{vgpu_dir}/vgpuvalidator", True))
    return ContainerAllocation(envs, tuple(mounts), tuple(notes))
