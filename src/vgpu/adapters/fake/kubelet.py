"""An in-memory kubelet for the device-plugin side: implements KubeletPort without sockets, and
KubeletCheckpointPort without a file."""

from collections.abc import Sequence

from vgpu.domain.trust import DeviceAssignment
from vgpu.ports.kubelet import (
    CheckpointUnreadable,
    ContainerResponse,
    DevicePluginHandler,
    KubeletError,
    PluginDevice,
    PluginOptions,
)

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


class FakeKubelet:
    """Behaves like the kubelet's device manager, in memory.

    As the real kubelet does, it refuses a registration while the plugin is not serving or when
    the resource name is not an extended resource name, and on Register it asks the plugin for
    its options (those, not the ones sent, are what it keeps). A restart drops the plugin's
    socket, so the plugin must serve again before it registers. Tests and embedders play the
    kubelet's part with `devices()` and `allocate()`.
    """

    def __init__(self, plugin_dir: str = DEVICE_PLUGIN_DIR, endpoint: str = "vgpu.sock") -> None:
        self._plugin_dir = plugin_dir.rstrip("/")
        self.socket_path = f"{self._plugin_dir}/{endpoint}"
        self.calls: list[str] = []
        self.registered: list[tuple[str, PluginOptions]] = []
        self.refusals = 0  # how many of the coming Register calls the kubelet refuses
        self._handler: DevicePluginHandler | None = None
        self._restarted = False

    # KubeletPort -----------------------------------------------------------------------------
    def serve(self, handler: DevicePluginHandler) -> None:
        self.calls.append("serve")
        self._handler = handler
        self._restarted = False

    def register(self, resource_name: str, options: PluginOptions) -> None:
        self.calls.append("register")
        handler = self._serving()
        if self.refusals > 0:
            self.refusals -= 1
            raise KubeletError(f"kubelet at {self._plugin_dir}/kubelet.sock refused to register")
        domain, _, name = resource_name.partition("/")
        if not domain or not name or domain.endswith("kubernetes.io"):
            raise KubeletError(f"invalid resource name {resource_name!r}: not an extended resource")
        self.registered.append((resource_name, handler.options()))

    def kubelet_restarted(self) -> bool:
        return self._restarted

    def stop(self) -> None:
        self.calls.append("stop")
        self._handler = None

    # the kubelet's side ----------------------------------------------------------------------
    def restart(self) -> None:
        """A kubelet restart: the socket directory is wiped and the plugin must start over."""
        self._handler = None
        self._restarted = True

    def devices(self) -> list[PluginDevice]:
        """The first device list ListAndWatch sends."""
        return next(iter(self._serving().watch_devices(lambda: True)))

    def allocate(self, requests: list[list[str]]) -> list[ContainerResponse]:
        """Allocate as the kubelet calls it: one list of device IDs per container."""
        if not self.registered:
            raise KubeletError("no device plugin has registered")
        return self._serving().allocate(requests)

    def _serving(self) -> DevicePluginHandler:
        if self._handler is None:
            raise KubeletError(f"no device plugin serves on {self.socket_path}")
        return self._handler


class FakeKubeletCheckpoint:
    """Implements KubeletCheckpointPort in memory: `entries` as the kubelet would have written
    them; `error` makes reads fail as an unreadable file does."""

    def __init__(self, entries: Sequence[DeviceAssignment] = ()) -> None:
        self.entries: list[DeviceAssignment] = list(entries)
        self.error = ""
        self.reads = 0

    @property
    def path(self) -> str:
        return f"{DEVICE_PLUGIN_DIR}/kubelet_internal_checkpoint"

    def assignments(self) -> Sequence[DeviceAssignment]:
        self.reads += 1
        if self.error:
            raise CheckpointUnreadable(f"{self.path}: {self.error}")
        return tuple(self.entries)
