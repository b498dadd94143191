"""Test doubles for the kubelet side: a handler that does nothing and a recording KubeletPort."""

from collections.abc import Callable, Iterator, Sequence

from vgpu.ports.kubelet import (
    ContainerResponse,
    DevicePluginHandler,
    KubeletError,
    PluginDevice,
    PluginOptions,
    PreferredRequest,
)

OPTIONS = PluginOptions(get_preferred_allocation_available=True)


class NullHandler:
    def options(self) -> PluginOptions:
        return OPTIONS

    def watch_devices(self, active: Callable[[], bool]) -> Iterator[list[PluginDevice]]:
        yield []

    def preferred_allocation(self, requests: Sequence[PreferredRequest]) -> list[list[str]]:
        return []

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        return []

    def pre_start(self, device_ids: Sequence[str]) -> None:
        return None


class FakeKubelet:
    """Records calls; `fail_register` refusals, `restarted` reports a kubelet restart."""

    socket_path = "/plugins/nvidia-gpu.sock"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail_register = 0
        self.restarted = False
        self.registered: list[tuple[str, PluginOptions]] = []

    def serve(self, handler: DevicePluginHandler) -> None:
        self.calls.append("serve")
        self.restarted = False

    def register(self, resource_name: str, options: PluginOptions) -> None:
        self.calls.append("register")
        if self.fail_register:
            self.fail_register -= 1
            raise KubeletError("kubelet socket /plugins/kubelet.sock does not exist")
        self.registered.append((resource_name, options))

    def kubelet_restarted(self) -> bool:
        return self.restarted

    def stop(self) -> None:
        self.calls.append("stop")
