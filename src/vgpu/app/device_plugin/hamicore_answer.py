"""A shared-card container's Allocate answer: HAMi-core's environment and mounts
(`vgpu.domain.allocation.allocate_container`), with the host directories prepared for it."""

import logging
import uuid
from collections.abc import Callable

from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.domain.allocation import AllocationConfig, AllocationInput, allocate_container
from vgpu.domain.errors import RequestError
from vgpu.domain.grant import ContainerGrant
from vgpu.domain.pod import Container, Pod
from vgpu.domain.request import parse_request
from vgpu.domain.vendor import Vendor
from vgpu.ports.kubelet import ContainerResponse

log = logging.getLogger(__name__)


class HamiCoreAnswers:
    """`new_cache_id` names each container's shared-region cache file."""

    def __init__(
        self,
        config: AllocationConfig,
        host: HostDirs,
        vendor: Vendor,
        new_cache_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._config = config
        self._host = host
        self._vendor = vendor
        self._new_cache_id = new_cache_id

    def answer(self, pod: Pod, container: Container, segment: ContainerGrant) -> ContainerResponse:
        self._host.prepare(pod.uid, container.name)
        call = AllocationInput(
            pod_uid=pod.uid,
            namespace=pod.namespace,
            container=container.name,
            cache_id=self._new_cache_id(),
            container_env=container.env,
            priority=self._priority(container),
            libvgpu_host_path=self._host.libvgpu_host_path(),
            license_present=self._host.license_present(),
        )
        allocation = allocate_container(segment, call, self._config)
        for note in allocation.notes:
            log.warning("pod %s: %s", pod.key, note)
        return ContainerResponse(envs=allocation.envs, mounts=allocation.mounts)

    def _priority(self, container: Container) -> int | None:
        try:
            request = parse_request(container, self._vendor)
        except RequestError as exc:
            log.warning("ignoring the priority of container %r: %s", container.name, exc)
            return None
        return None if request is None else request.priority
