"""What a GPU offers for MIG, read from NVML: whether it can, whether it is on, and the GPU
instance profiles with their sizes and placements (docs/protocol.md#mig-register-annotation)."""

import math
from types import ModuleType
from typing import Any

from vgpu.domain.mig import MigCapability, MigPlacement, MigProfile

# NVML's GPU instance profiles by slice count (GPU_INSTANCE_PROFILE_<n>_SLICE); HAMi has no 5g.
PROFILE_SLICES = (1, 2, 3, 4, 6, 7, 8)


def read_mig_capability(nvml: ModuleType, handle: Any) -> MigCapability:
    """The GPU's MIG support; raises pynvml's NVMLError for failures other than "not supported".

    Profiles are listed only while MIG is enabled: NVML answers the profile queries only then.
    """
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError_NotSupported:
        return MigCapability(supported=False)
    enabled = current == nvml.NVML_DEVICE_MIG_ENABLE
    profiles = tuple(profiles_by_id(nvml, handle).values()) if enabled else ()
    return MigCapability(True, enabled, pending != current, profiles)


def profiles_by_id(nvml: ModuleType, handle: Any) -> dict[int, MigProfile]:
    """The GPU's instance profiles by NVML profile id (the GPU must be in MIG mode)."""
    infos = []
    for slices in PROFILE_SLICES:
        profile_id = getattr(nvml, f"NVML_GPU_INSTANCE_PROFILE_{slices}_SLICE", None)
        if profile_id is None:
            continue
        try:
            infos.append(nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile_id))
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_InvalidArgument):
            continue  # this GPU has no such profile
    largest = max((int(info.multiprocessorCount) for info in infos), default=0)
    found = {}
    for info in infos:
        placements = tuple(
            MigPlacement(int(p.start), int(p.size))
            for p in nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id)
        )
        memory = int(info.memorySizeMB)
        multiprocessors = int(info.multiprocessorCount)
        found[int(info.id)] = MigProfile(
            name=f"{int(info.sliceCount)}g.{math.ceil(memory / 1024)}gb",
            slices=int(info.sliceCount),
            memory_mib=memory,
            core=math.ceil(multiprocessors * 100 / largest) if largest else 0,
            placements=placements,
            instances=int(info.instanceCount),
            multiprocessors=multiprocessors,
        )
    return found
