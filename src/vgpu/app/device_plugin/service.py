"""The device plugin's answers to the kubelet (implements DevicePluginHandler)."""

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from vgpu.app.device_plugin.allocator import Allocator
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.domain.errors import DomainError
from vgpu.domain.grant import ContainerGrant
from vgpu.ports.kubelet import (
    ContainerResponse,
    DevicePluginError,
    PluginDevice,
    PluginOptions,
    PreferredRequest,
)

log = logging.getLogger(__name__)


class DevicePluginService:
    """ListAndWatch from the GPU state, Allocate through the allocator, the rest per HAMi."""

    def __init__(
        self,
        gpus: GpuState,
        allocator: Allocator,
        preferred_allocation: bool,
        watch_poll_s: float = 0.5,
    ) -> None:
        self._gpus = gpus
        self._allocator = allocator
        self._options = PluginOptions(
            pre_start_required=False, get_preferred_allocation_available=preferred_allocation
        )
        self._poll = watch_poll_s

    def options(self) -> PluginOptions:
        return self._options

    def watch_devices(self, active: Callable[[], bool]) -> Iterator[list[PluginDevice]]:
        sent = None
        while active():
            generation, devices = self._gpus.plugin_devices()
            if generation != sent:
                healthy = sum(d.healthy for d in devices)
                log.info("ListAndWatch: sending %d devices (%d healthy)", len(devices), healthy)
                yield devices
                sent = generation
            self._gpus.wait_for_change(generation, self._poll)

    def preferred_allocation(self, requests: Sequence[PreferredRequest]) -> list[list[str]]:
        try:
            pending = self._allocator.pending_grants()
        except (DevicePluginError, DomainError) as exc:
            log.info("GetPreferredAllocation: no scheduler grants to follow (%s)", exc)
            pending = []
        answers = []
        for i, request in enumerate(requests):
            segment = pending[i] if i < len(pending) else ()
            answers.append(self._prefer(request, segment))
        log.info("GetPreferredAllocation: %s", answers)
        return answers

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        return self._allocator.allocate(requests)

    def pre_start(self, device_ids: Sequence[str]) -> None:
        log.debug("PreStartContainer for %s: nothing to do", list(device_ids))

    def _prefer(self, request: PreferredRequest, segment: ContainerGrant) -> list[str]:
        """Must-include IDs, then one replica per grant of each granted card (a card granted
        twice, as MIG instances, gets two), then any to fill the size."""
        chosen = list(dict.fromkeys(request.must_include))
        covered = Counter(self._gpus.physical_uuid(i) for i in chosen)
        for grant in segment:
            if covered[grant.uuid] > 0:
                covered[grant.uuid] -= 1
                continue
            replica = next(
                (
                    i
                    for i in request.available
                    if i not in chosen and self._gpus.physical_uuid(i) == grant.uuid
                ),
                None,
            )
            if replica is not None:
                chosen.append(replica)
        size = request.size if request.size > 0 else len(chosen)
        for device_id in request.available:
            if len(chosen) >= size:
                break
            if device_id not in chosen:
                chosen.append(device_id)
        return chosen[: max(size, len(request.must_include))]
