"""A device-plugin handler that does nothing, for tests of the kubelet session."""

from collections.abc import Callable, Iterator, Sequence

from vgpu.ports.kubelet import (
    ContainerResponse,
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
