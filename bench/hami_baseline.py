"""HAMi's way of answering a filter call, in Python, as the benchmark's baseline.

HAMi's scheduler (pkg/scheduler/scheduler.go, `Filter` -> `getNodesUsage`)
keeps every scheduled pod with its decoded device grants in a pod cache. On each filter call it
builds a fresh usage record for every card of every registered node, then walks every cached
pod and, for each granted card, scans that node's card list for the matching id and adds the
pod's memory, cores and one slice. Only then does it fit and score the candidate nodes.

This module reproduces that state handling: `HamiStyleScheduler.filter` rebuilds usage from
all pods on every call and then fits and scores with the same domain `decide` vgpu uses, so the
two answers can be compared decision for decision and the difference is the state handling.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.domain import (
    Budget,
    Decision,
    Device,
    NodeView,
    PodGrants,
    PodPlan,
    Usage,
    decide,
    decode_pod_grants,
)


@dataclass(slots=True)
class _CardUsage:
    """HAMi's DeviceUsage: a card and the running totals on it."""

    device: Device
    used: int = 0
    memory: int = 0
    cores: int = 0


@dataclass(frozen=True, slots=True)
class CachedPod:
    """An entry of HAMi's pod cache: the node and the grants decoded when the pod was seen."""

    key: str
    node: str
    grants: PodGrants


class HamiStyleScheduler:
    """Node registry plus pod cache; usage is recomputed from scratch on every filter call."""

    def __init__(self, devices: dict[str, list[Device]]) -> None:
        self._devices = devices
        self._pods: dict[str, CachedPod] = {}

    def add_pod(self, key: str, node: str, annotation: str) -> None:
        """What HAMi's pod informer does: decode the grant annotation once and cache it."""
        self._pods[key] = CachedPod(key, node, decode_pod_grants(annotation))

    def add_decoded(self, key: str, node: str, grants: PodGrants) -> None:
        """What HAMi's filter does after a placement (`addPod`)."""
        self._pods[key] = CachedPod(key, node, grants)

    def remove_pod(self, key: str) -> None:
        self._pods.pop(key, None)

    def usage(self) -> dict[str, list[_CardUsage]]:
        """`getNodesUsage`: every node's cards, then every pod's grants added card by card."""
        overall = {node: [_CardUsage(d) for d in cards] for node, cards in self._devices.items()}
        for pod in self._pods.values():
            cards = overall.get(pod.node)
            if cards is None:
                continue
            for container in pod.grants:
                for grant in container:
                    for card in cards:  # HAMi matches the card id by a linear scan
                        if card.device.uuid == grant.uuid:
                            card.used += 1
                            card.memory += grant.memory
                            card.cores += grant.cores
        return overall

    def filter(self, plan: PodPlan, candidates: Sequence[str], budget: Budget) -> Decision:
        """Rebuild usage from all pods, then fit and score the candidates."""
        overall = self.usage()
        views = []
        for node in candidates:
            cards = overall.get(node, [])
            usage = {c.device.uuid: Usage(c.used, c.memory, c.cores) for c in cards if c.used}
            views.append(NodeView(node, tuple(c.device for c in cards), usage))
        return decide(plan, views, budget)
