"""Which of the node's GPUs this plugin serves, and in MIG mode with which instance profiles.

NVML's GPUs (or the fake's) are kept when the node config does not filter them out
(`nodeconfig.NodeSettings.keeps`). A kept GPU in MIG mode is registered with the profiles the
GPU port reads, renamed and filtered by `mig_profile_allowlist` when one is configured; a GPU in
MIG mode without any profile left is not registered in MIG mode, as HAMi leaves it out. Each
decision is logged with the GPU's index and UUID.
"""

import logging

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.nodeconfig import NodeSettings
from vgpu.domain.inventory import GpuInfo
from vgpu.domain.mig import MigAllowlistEntry, MigProfile, allowlisted_profiles
from vgpu.ports.gpu import GpuPort, GpuUnavailable, MigError, MigPort

log = logging.getLogger(__name__)


def discover(
    port: GpuPort,
    settings: NodeSettings,
    numa_topology: bool,
    allowlist: tuple[MigAllowlistEntry, ...] | None = None,
) -> GpuState:
    """The GPUs this plugin serves: NVML's (or the fake's) minus the node config's filters;
    those in MIG mode with the profiles `allowlist` lets them publish (None: all)."""
    kept = []
    for gpu in port.discover():
        if settings.keeps(gpu):
            log.info(
                "GPU %d %s: %s, %d MiB, NUMA %s%s",
                gpu.index,
                gpu.uuid,
                gpu.name,
                gpu.memory_mib,
                gpu.numa if gpu.numa >= 0 else "unknown",
                ", MIG on" if gpu.mig_enabled else "",
            )
            kept.append(gpu)
        else:
            log.info("GPU %d %s: filtered out by the node config", gpu.index, gpu.uuid)
    if numa_topology:
        log.info("each GPU's NUMA node is sent to the kubelet (numa_topology on)")
    else:
        log.info("no NUMA node is sent to the kubelet (numa_topology off)")
    profiles = _mig_profiles(port, kept, allowlist)
    return GpuState(kept, settings.sharing, numa_topology, profiles)


def _mig_profiles(
    port: GpuPort, gpus: list[GpuInfo], allowlist: tuple[MigAllowlistEntry, ...] | None
) -> dict[str, tuple[MigProfile, ...]]:
    """The instance profiles of the kept GPUs in MIG mode, as the allowlist renames and
    filters them; one without any is not registered (logged), as HAMi leaves it out."""
    in_mig = [gpu for gpu in gpus if gpu.mig_enabled]
    if not in_mig:
        return {}
    profiles: dict[str, tuple[MigProfile, ...]] = {}
    if isinstance(port, MigPort):
        try:
            profiles = port.mig_profiles()
        except (MigError, GpuUnavailable) as exc:
            log.error("MIG profiles not readable: %s", exc)
    for gpu in in_mig:
        found = profiles.get(gpu.uuid, ())
        if allowlist is not None:
            allowed = allowlisted_profiles(gpu.name, found, allowlist)
            if allowed is None:
                log.warning(
                    "GPU %d %s: no mig_profile_allowlist entry names model %r: not registered "
                    "in MIG mode",
                    gpu.index,
                    gpu.uuid,
                    gpu.name,
                )
                profiles.pop(gpu.uuid, None)
                continue
            found = profiles[gpu.uuid] = allowed
        if found:
            names = ", ".join(p.name for p in found)
            log.info("GPU %d %s: MIG profiles %s", gpu.index, gpu.uuid, names)
        else:
            log.warning("GPU %d %s: MIG on, no profile known: not registered", gpu.index, gpu.uuid)
    return profiles
