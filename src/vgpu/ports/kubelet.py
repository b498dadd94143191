"""The kubelet's device-plugin protocol as the device-plugin service sees it.

Two sides: `KubeletPort` is what the application asks of the kubelet (serve the plugin on a
unix socket, register, notice a kubelet restart, stop); `DevicePluginHandler` is what the gRPC
adapter asks of the application when the kubelet calls in. `KubeletCheckpointPort` reads what
the kubelet recorded of the devices it gave containers. Requests and answers are plain
dataclasses, so the application never sees protobuf types.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from vgpu.domain.allocation import Mount
from vgpu.domain.trust import DeviceAssignment

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
API_VERSION = "v1beta1"


class KubeletError(RuntimeError):
    """The kubelet cannot be reached or refused us; the message names the socket and why."""


class DevicePluginError(RuntimeError):
    """A kubelet call the plugin refuses (bad grant, unknown pod...); the message says why."""


@dataclass(frozen=True, slots=True)
class PluginOptions:
    """`DevicePluginOptions`: which optional calls the kubelet should make."""

    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False


@dataclass(frozen=True, slots=True)
class PluginDevice:
    """One advertised device (a replica of a GPU) in a ListAndWatch answer."""

    id: str
    healthy: bool = True
    numa: int | None = None  # sent as Device.topology only when set


@dataclass(frozen=True, slots=True)
class PreferredRequest:
    """One container of a GetPreferredAllocation call."""

    available: Sequence[str]
    must_include: Sequence[str] = ()
    size: int = 0


@dataclass(frozen=True, slots=True)
class DeviceNode:
    """`DeviceSpec`: a device file to expose in the container."""

    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass(frozen=True, slots=True)
class ContainerResponse:
    """`ContainerAllocateResponse`: what the container runtime adds to one container."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: Sequence[Mount] = ()
    devices: Sequence[DeviceNode] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)


class DevicePluginHandler(Protocol):
    """The device plugin's behaviour behind `v1beta1.DevicePlugin`.

    Methods raise DevicePluginError with a sentence for the kubelet's error message.
    """

    def options(self) -> PluginOptions: ...

    def watch_devices(self, active: Callable[[], bool]) -> Iterator[list[PluginDevice]]:
        """The full device list now, then again after every change, while `active()`."""
        ...

    def preferred_allocation(self, requests: Sequence[PreferredRequest]) -> list[list[str]]:
        """Device IDs to prefer, one list per container request."""
        ...

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        """One answer per container request; each request is the device IDs kubelet chose."""
        ...

    def pre_start(self, device_ids: Sequence[str]) -> None: ...


class KubeletPort(Protocol):
    """Serving the plugin to the kubelet and registering with it."""

    @property
    def socket_path(self) -> str:
        """Where the plugin is served: `<device-plugin dir>/<endpoint>`."""
        ...

    def serve(self, handler: DevicePluginHandler) -> None:
        """Start serving `v1beta1.DevicePlugin` on `socket_path` (a stale file is replaced)."""
        ...

    def register(self, resource_name: str, options: PluginOptions) -> None:
        """Call `Registration/Register` on `kubelet.sock`; KubeletError says why it failed."""
        ...

    def kubelet_restarted(self) -> bool:
        """True when `kubelet.sock` was re-created, or our socket removed, since `register`."""
        ...

    def stop(self) -> None:
        """Stop serving and remove the socket file; harmless when not serving."""
        ...


class CheckpointUnreadable(RuntimeError):
    """The kubelet's device checkpoint exists but does not read; the message says why."""


class KubeletCheckpointPort(Protocol):
    """The kubelet's record of which containers it gave devices (`kubelet_internal_checkpoint`
    in its device-plugin directory)."""

    @property
    def path(self) -> str: ...

    def assignments(self) -> Sequence[DeviceAssignment]:
        """Every container's devices, all resources; empty when the file does not exist.
        CheckpointUnreadable when it exists and cannot be read or parsed."""
        ...
