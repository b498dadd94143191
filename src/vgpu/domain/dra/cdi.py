"""The CDI spec of a prepared claim: what the container runtime adds to every container that
uses the claim so HAMi-core enforces the claim's shares.

One spec per claim (kind `vgpu.io/claim`), one CDI device per allocated device share, named
`<claim uid>-<device>[-<share id>]`. The kubelet hands the runtime the ids of the devices a
container's requests got; the runtime applies the spec's own edits once and each device's
edits in turn (a later value of the same variable replaces an earlier one).

- Each device's edits: `CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m` and `CUDA_DEVICE_SM_LIMIT_<i>`
  (HAMi-core's per-device limits; `i` is the CUDA ordinal of the device's GPU in the
  container: its position among the claim's GPUs in the node's index order, which is PCI bus
  order, as `CUDA_DEVICE_ORDER=PCI_BUS_ID` makes CUDA number them),
  `CUDA_DEVICE_MEMORY_SHARED_CACHE` in the share's own directory, mounted read-write at the
  same path: every container and pod using the share accounts in one region, so the share's
  limit holds across them all. Two shares of one GPU in one claim write the same `_<i>` (the
  later one wins, with its own region): a container gets one of that GPU's shares, never
  another GPU's.
- The spec's edits: HAMi-core's library and `ld.so.preload` (read-only), the lock directory,
  `CUDA_DEVICE_ORDER`, `CUDA_DEVICE_MEMORY_LIMIT` and `CUDA_DEVICE_SM_LIMIT` set to the
  smallest share of the claim (HAMi-core's default for a GPU without a per-device value, so no
  visible GPU is ever left unlimited), and, when the GPUs are made visible by environment,
  `NVIDIA_VISIBLE_DEVICES` in the same order.
- The GPU itself: NVIDIA's own CDI device (`nvidia.com/gpu=<uuid or index>`, when NVIDIA's
  static spec defines one for every GPU of the claim) as a second CDI id of each device, else
  `NVIDIA_VISIBLE_DEVICES=<uuids>` for the NVIDIA container runtime.

Admin-access devices get their GPU and nothing of HAMi-core.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace  # noqa: F401 (replace: used by the examples)

from vgpu.domain.dra.limits import DeviceShare

CDI_VERSION = "0.5.0"  # the first version that allows device names starting with a digit
CDI_KIND = "vgpu.io/claim"
"""The CDI vendor/class of the per-claim specs the driver writes."""
NVIDIA_CDI_KIND = "nvidia.com/gpu"
"""The CDI vendor/class of NVIDIA's static GPU specs, used to make a GPU visible."""
CACHE_FILE = "vgpu.cache"
CONTAINER_LOCK_DIR = "/tmp/vgpulock"  # where HAMi-core looks, whatever the host path


@dataclass(frozen=True, slots=True)
class HamiCoreSetup:
    """The node's HAMi-core files and switches every spec uses."""

    hook_path: str = "/usr/local"
    libvgpu_host_path: str = ""  # default: <hook>/vgpu/libvgpu.so
    lock_dir: str = CONTAINER_LOCK_DIR  # on the host
    license_present: bool = False
    disable_core_limit: bool = False
    cuda_log_level: str = ""
    kind: str = CDI_KIND


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """The spec to write and, per share in the claim's order, the CDI ids to return."""

    spec: dict[str, object]
    cdi_ids: tuple[tuple[str, ...], ...]


def cdi_device_name(claim_uid: str, share: DeviceShare) -> str:
    """`<claim uid>-<device>` or `<claim uid>-<device>-<share id>`.

    >>> share = DeviceShare("gpu", "node-a", "gpu-0", "5a1f", "GPU-a", 2**30, 10)
    >>> cdi_device_name("c0ffee", share), cdi_device_name("c0ffee", replace(share, share_id=None))
    ('c0ffee-gpu-0-5a1f', 'c0ffee-gpu-0')
    """
    suffix = f"-{share.share_id}" if share.share_id else ""
    return f"{claim_uid}-{share.device}{suffix}"


def claim_spec(
    claim_uid: str,
    shares: Sequence[DeviceShare],
    setup: HamiCoreSetup,
    share_dirs: Mapping[str, str],
    nvidia_ids: Mapping[str, str],
    gpu_index: Mapping[str, int],
) -> ClaimSpec:
    """The spec of a claim's `shares`. `share_dirs`: each limited share's host directory by
    `dir_name`; `nvidia_ids`: NVIDIA's CDI id by GPU uuid, where its static spec has one;
    `gpu_index`: each GPU's index on the node (NVML's, in PCI bus order) by uuid."""
    uuids = sorted({s.uuid for s in shares}, key=lambda uuid: gpu_index[uuid])
    ordinal = {uuid: i for i, uuid in enumerate(uuids)}
    by_cdi = all(u in nvidia_ids for u in uuids)
    limited = [s for s in shares if not s.admin]
    devices = []
    ids = []
    for i, share in enumerate(shares):
        name = cdi_device_name(claim_uid, share)
        env = [f"VGPU_DRA_DEVICE_{i}={share.uuid}"]  # a device's edits may not be empty
        mounts = []
        if not share.admin:
            directory = share_dirs[share.dir_name]
            gpu = ordinal[share.uuid]
            env += [
                f"CUDA_DEVICE_MEMORY_LIMIT_{gpu}={share.limit_mib}m",
                f"CUDA_DEVICE_SM_LIMIT_{gpu}={share.cores}",
                f"CUDA_DEVICE_MEMORY_SHARED_CACHE={directory}/{CACHE_FILE}",
            ]
            mounts.append(_mount(directory, directory, writable=True))
        edits: dict[str, object] = {"env": env}
        if mounts:
            edits["mounts"] = mounts
        devices.append({"name": name, "containerEdits": edits})
        own = f"{setup.kind}={name}"
        ids.append((own, nvidia_ids[share.uuid]) if by_cdi else (own,))
    spec: dict[str, object] = {
        "cdiVersion": CDI_VERSION,
        "kind": setup.kind,
        "devices": devices,
        "containerEdits": _claim_edits(limited, setup, [] if by_cdi else uuids),
    }
    return ClaimSpec(spec, tuple(ids))


def _claim_edits(
    limited: Sequence[DeviceShare], setup: HamiCoreSetup, visible_by_env: Sequence[str]
) -> dict[str, object]:
    env = []
    if visible_by_env:
        env.append(f"NVIDIA_VISIBLE_DEVICES={','.join(visible_by_env)}")
    mounts = []
    if limited:
        vgpu = f"{setup.hook_path}/vgpu"
        env += [
            "CUDA_DEVICE_ORDER=PCI_BUS_ID",  # the order `_<i>` follows, whatever the GPUs' speed
            f"CUDA_DEVICE_MEMORY_LIMIT={min(s.limit_mib for s in limited)}m",
            f"CUDA_DEVICE_SM_LIMIT={min(s.cores for s in limited)}",
        ]
        if setup.disable_core_limit:
            env.append("GPU_CORE_UTILIZATION_POLICY=disable")
        if setup.cuda_log_level:
            env.append(f"LIBCUDA_LOG_LEVEL={setup.cuda_log_level}")
        library = setup.libvgpu_host_path or f"{vgpu}/libvgpu.so"
        mounts += [
            _mount(f"{vgpu}/libvgpu.so", library, writable=False),
            _mount("/etc/ld.so.preload", f"{vgpu}/ld.so.preload", writable=False),
            _mount(CONTAINER_LOCK_DIR, setup.lock_dir, writable=True),
        ]
        if setup.license_present:
            mounts += [
                _mount("/tmp/license", f"{vgpu}/license", writable=False),
                _mount("/usr/bin/vgpuvalidator", f"{vgpu}/vgpuvalidator", writable=False),
            ]
    edits: dict[str, object] = {}
    if env:
        edits["env"] = env
    if mounts:
        edits["mounts"] = mounts
    return edits


def _mount(container: str, host: str, *, writable: bool) -> dict[str, object]:
    return {
        "hostPath": host,
        "containerPath": container,
        "type": "bind",
        "options": ["rw" if writable else "ro", "nosuid", "nodev", "bind"],
    }
