"""Creating and destroying MIG instances through NVML, in the order HAMi v2.10 uses
(docs/protocol.md#mig-instance-lifecycle). Written against NVML's documented API and tested with a
patched driver only: check it with `scripts/nvml_probe.py` and a MIG-capable GPU before relying on
it.

The GPU's MIG mode is never switched here: enabling it needs an idle GPU and often a reset,
which is the operator's decision (`nvidia-smi -mig 1`); a GPU not in MIG mode is refused.
"""

import contextlib
import ctypes
from types import ModuleType
from typing import Any

from vgpu.adapters.nvml.library import text
from vgpu.adapters.nvml.mig import PROFILE_SLICES, profiles_by_id
from vgpu.domain.mig import MigInstance, MigPlacement
from vgpu.ports.gpu import MigError


def profile_slices(profile: str) -> int:
    """The slice count a profile name selects, from the part before the first `.` (`3g.20gb`
    -> 3), as HAMi reads it; MigError for a name NVML has no profile for."""
    head = profile.partition(".")[0]
    if len(head) >= 2 and head.endswith("g") and head[:-1].isdigit():
        slices = int(head[:-1])
        if slices in PROFILE_SLICES:
            return slices
    raise MigError(f"profile {profile!r}: not a MIG profile name such as 1g.10gb or 3g.40gb")


def create_instance(
    nvml: ModuleType, gpu_uuid: str, handle: Any, profile: str, placement: MigPlacement
) -> MigInstance:
    """A GPU instance of `profile` at `placement` with one shared compute instance; anything
    made before a failure is destroyed again. Raises MigError."""
    where = f"GPU {gpu_uuid}, profile {profile} at {placement.start}+{placement.size}"
    slices = profile_slices(profile)
    made: list[Any] = []  # compute instance then GPU instance, destroyed in reverse on failure
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        if current != nvml.NVML_DEVICE_MIG_ENABLE:
            raise MigError(f"{where}: the GPU is not in MIG mode")
        info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(
            handle, getattr(nvml, f"NVML_GPU_INSTANCE_PROFILE_{slices}_SLICE")
        )
        offered = {
            (int(p.start), int(p.size))
            for p in nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id)
        }
        if (placement.start, placement.size) not in offered:
            raise MigError(f"{where}: the scheduler selected an invalid placement")
        wanted = nvml.c_nvmlGpuInstancePlacement_t()
        wanted.start, wanted.size = placement.start, placement.size
        gpu_instance = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
            handle, info.id, ctypes.byref(wanted)
        )
        made.append((nvml.nvmlGpuInstanceDestroy, gpu_instance))
        gpu_instance_id = int(nvml.nvmlGpuInstanceGetInfo(gpu_instance).id)
        ci_info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gpu_instance,
            getattr(nvml, f"NVML_COMPUTE_INSTANCE_PROFILE_{slices}_SLICE"),
            nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
        )
        compute_instance = nvml.nvmlGpuInstanceCreateComputeInstance(gpu_instance, ci_info.id)
        made.append((nvml.nvmlComputeInstanceDestroy, compute_instance))
        compute_instance_id = int(nvml.nvmlComputeInstanceGetInfo(compute_instance).id)
        mig_uuid = _mig_uuid(nvml, handle, gpu_instance_id)
        if mig_uuid is None:
            raise MigError(f"{where}: NVML lists no MIG device for GPU instance {gpu_instance_id}")
    except (MigError, nvml.NVMLError) as err:
        _undo(nvml, made)
        if isinstance(err, MigError):
            raise
        raise MigError(f"{where}: NVML refused ({err})") from err
    return MigInstance(gpu_uuid, profile, placement, mig_uuid, gpu_instance_id, compute_instance_id)


def destroy_instance(nvml: ModuleType, handle: Any, instance: MigInstance) -> None:
    """Destroy the compute instance, then the GPU instance; parts already gone are skipped."""
    try:
        try:
            gpu_instance = nvml.nvmlDeviceGetGpuInstanceById(handle, instance.gpu_instance_id)
        except nvml.NVMLError_NotFound:
            return
        try:
            compute_instance = nvml.nvmlGpuInstanceGetComputeInstanceById(
                gpu_instance, instance.compute_instance_id
            )
        except nvml.NVMLError_NotFound:
            pass
        else:
            nvml.nvmlComputeInstanceDestroy(compute_instance)
        nvml.nvmlGpuInstanceDestroy(gpu_instance)
    except nvml.NVMLError as err:
        raise MigError(
            f"GPU {instance.gpu_uuid}: cannot destroy MIG instance {instance.mig_uuid} ({err})"
        ) from err


def _mig_uuid(nvml: ModuleType, handle: Any, gpu_instance_id: int) -> str | None:
    for index in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            device = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except nvml.NVMLError_NotFound:
            continue
        if int(nvml.nvmlDeviceGetGpuInstanceId(device)) == gpu_instance_id:
            return text(nvml.nvmlDeviceGetUUID(device))
    return None


def _undo(nvml: ModuleType, made: list[Any]) -> None:
    for destroy, instance in reversed(made):
        with contextlib.suppress(nvml.NVMLError):  # the first failure is the one to report
            destroy(instance)


def list_instances(nvml: ModuleType, gpu_uuid: str, handle: Any) -> list[MigInstance]:
    """The MIG devices NVML lists on one GPU in MIG mode."""
    names = {pid: profile.name for pid, profile in profiles_by_id(nvml, handle).items()}
    found = []
    for index in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            device = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except nvml.NVMLError_NotFound:
            continue
        gpu_instance_id = int(nvml.nvmlDeviceGetGpuInstanceId(device))
        info = nvml.nvmlGpuInstanceGetInfo(
            nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance_id)
        )
        found.append(
            MigInstance(
                gpu_uuid,
                names.get(int(info.profileId), f"profile-{int(info.profileId)}"),
                MigPlacement(int(info.placement.start), int(info.placement.size)),
                text(nvml.nvmlDeviceGetUUID(device)),
                gpu_instance_id,
                int(nvml.nvmlDeviceGetComputeInstanceId(device)),
            )
        )
    return found
