"""The node's GPUs as the plugin advertises them: kept cards, their health, and changes."""

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from vgpu.domain.device import Device
from vgpu.domain.inventory import GpuInfo, HealthEvent, SharingConfig, register_device
from vgpu.domain.mig import MigProfile
from vgpu.ports.kubelet import PluginDevice

log = logging.getLogger(__name__)


class GpuState:
    """Thread-safe: health events come from one thread, kubelet calls from others.

    Every change bumps `generation` and wakes the waiters (ListAndWatch streams) and the
    listeners (the node registrar).
    """

    def __init__(
        self,
        gpus: Sequence[GpuInfo],
        sharing: SharingConfig,
        numa_topology: bool = False,
        mig_profiles: Mapping[str, tuple[MigProfile, ...]] | None = None,
    ) -> None:
        self._gpus = {gpu.uuid: gpu for gpu in sorted(gpus, key=lambda g: g.index)}
        self._mig_profiles = dict(mig_profiles or {})  # by uuid, for the GPUs in MIG mode
        self._sharing = sharing
        self._numa = numa_topology
        self._healthy = dict.fromkeys(self._gpus, True)
        self._generation = 0
        self._changed = threading.Condition()
        self._listeners: list[Callable[[], None]] = []
        self._replicas = {
            _replica_id(uuid, i): uuid for uuid in self._gpus for i in range(sharing.split_count)
        }

    @property
    def sharing(self) -> SharingConfig:
        return self._sharing

    @property
    def generation(self) -> int:
        with self._changed:
            return self._generation

    def uuids(self) -> list[str]:
        return list(self._gpus)

    def plugin_devices(self) -> tuple[int, list[PluginDevice]]:
        """The generation and the advertised list: `split_count` replicas `<uuid>-<i>` per GPU,
        each with its GPU's NUMA node when `numa_topology` is on and the node is known (a GPU
        whose NUMA node is unknown gets none: the kubelet's Topology Manager then treats it as
        usable from any node, which is true, where a guessed node could be false)."""
        with self._changed:
            return self._generation, [
                PluginDevice(
                    id=_replica_id(uuid, i),
                    healthy=self._healthy[uuid],
                    numa=gpu.numa if self._numa and gpu.numa >= 0 else None,
                )
                for uuid, gpu in self._gpus.items()
                for i in range(self._sharing.split_count)
            ]

    def registered_devices(self) -> list[Device]:
        """The cards as `hami.io/node-nvidia-register` lists them (scaling applied). A GPU in
        MIG mode with no profile known is left out, as HAMi leaves it out: nothing could be
        placed on it."""
        with self._changed:
            return [
                self._register(uuid, gpu)
                for uuid, gpu in self._gpus.items()
                if not gpu.mig_enabled or self._mig_profiles.get(uuid)
            ]

    def mig_uuids(self) -> frozenset[str]:
        """The GPUs registered in MIG mode: MIG on and at least one profile published."""
        with self._changed:
            return frozenset(
                uuid
                for uuid, gpu in self._gpus.items()
                if gpu.mig_enabled and self._mig_profiles.get(uuid)
            )

    def card(self, uuid: str) -> Device | None:
        """The registered view of one card, or None when this node does not have it."""
        with self._changed:
            gpu = self._gpus.get(uuid)
            return None if gpu is None else self._register(uuid, gpu)

    def _register(self, uuid: str, gpu: GpuInfo) -> Device:
        profiles = self._mig_profiles.get(uuid, ())
        return register_device(gpu, self._sharing, self._healthy[uuid], profiles)

    def physical_uuid(self, device_id: str) -> str | None:
        """The GPU behind an advertised replica ID, or None for an ID we never advertised."""
        return self._replicas.get(device_id)

    def apply(self, events: Iterable[HealthEvent]) -> bool:
        """Record health changes; True (and listeners called) when anything changed."""
        changed = []
        with self._changed:
            for event in events:
                if event.uuid not in self._gpus:
                    log.info(
                        "health event for %s ignored: not a GPU this plugin serves", event.uuid
                    )
                    continue
                if self._healthy[event.uuid] != event.healthy:
                    self._healthy[event.uuid] = event.healthy
                    changed.append(event)
            if changed:
                self._generation += 1
                self._changed.notify_all()
            listeners = list(self._listeners)
        for event in changed:
            state = "healthy" if event.healthy else "unhealthy"
            reason = f": {event.reason}" if event.reason else ""
            log.warning("GPU %s is now %s%s", event.uuid, state, reason)
        if changed:
            for listener in listeners:
                listener()
        return bool(changed)

    def wait_for_change(self, seen: int, timeout_s: float) -> int:
        """Block until the generation differs from `seen` or the timeout passes; returns it."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != seen, timeout=timeout_s)
            return self._generation

    def on_change(self, listener: Callable[[], None]) -> None:
        with self._changed:
            self._listeners.append(listener)


def _replica_id(uuid: str, i: int) -> str:
    return f"{uuid}-{i}"
