"""The plugin's own count of what the pods on its node hold on each card.

The scheduler's ledger is not the last word: a leaked key, a second scheduler or a bug could
promise a card twice, and a tenant may rewrite its own pod's annotations. Before serving, the
plugin adds up what the other pods on its node hold and refuses a pod whose own grant would
take any card past the capacity the plugin itself registered (split count, scaled memory,
scaled cores).

A pod that has not finished and is still on this node counts, from the first source that has
it:

1. the served record: the grant this plugin served it, whatever its annotations say since;
2. the kubelet's device checkpoint: what the kubelet gave it (pods served by HAMi's plugin, or
   by vgpu before it kept a record), signed or not;
3. its grant, when trusted, the pod asks for a GPU and has not been refused (bind phase
   `failed`): pods bound here and still waiting to be served.

Annotations on a pod in none of these (forged ones on a pod that asks for no GPU, or whose
Allocate was refused) count for nothing. The pods are read from the cluster port, which
answers from its watch cache once synced, so this costs no API call; record entries and
checkpoint holdings are decoded once, so only the waiting pods' grants are judged per call.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.kubeletholders import KubeletHolders
from vgpu.app.device_plugin.pending import FAILED
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.device import IDLE, Usage
from vgpu.domain.grant import PodGrants, pod_footprint
from vgpu.domain.pod import Pod
from vgpu.domain.request import asks_for_gpu
from vgpu.domain.vendor import BIND_PHASE_ANNOTATION, Vendor
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.kubelet import DevicePluginError


class Source(StrEnum):
    SERVED = "served record"
    KUBELET = "kubelet checkpoint"
    GRANT = "trusted grant"


@dataclass(frozen=True, slots=True)
class Holder:
    """A pod counted on this node, from which source, holding what per card. `signed` is
    known for served grants (recorded when served); None: judge the pod's grant to know."""

    pod: Pod
    source: Source
    footprint: Mapping[str, Usage]
    signed: bool | None = None


class NodeLedger:
    def __init__(
        self,
        cluster: ClusterPort,
        gpus: GpuState,
        node: str,
        vendor: Vendor,
        trust: NodeGrantTrust,
        served: ServedRecord,
        kubelet: KubeletHolders,
    ) -> None:
        self._cluster = cluster
        self._gpus = gpus
        self._node = node
        self._vendor = vendor
        self._trust = trust
        self._served = served
        self._kubelet = kubelet

    def holders(self, pods: Sequence[Pod] | None = None, excluding_uid: str = "") -> list[Holder]:
        """Every pod counted here but the one with uid `excluding_uid`; `pods`: the node's pods
        when already read (else they are listed). ClusterError when they cannot be listed,
        RecordError when the served record cannot be read: then nothing can be counted."""
        if pods is None:
            pods = self._cluster.list_pods(self._node)
        live = {p.uid: p for p in pods if not p.is_finished and p.node_name == self._node}
        served = self._served.entries()
        held = self._kubelet.holdings(live)
        found = []
        for uid, pod in live.items():
            if uid == excluding_uid:
                continue
            if uid in served:
                record = served[uid]
                found.append(Holder(pod, Source.SERVED, record.footprint, record.grant.signed))
            elif uid in held:
                found.append(Holder(pod, Source.KUBELET, held[uid].footprint))
            else:
                grants = self._waiting_grants(pod)
                if grants is not None:
                    found.append(Holder(pod, Source.GRANT, pod_footprint(grants, pod.init_count)))
        return found

    def check(self, pod: Pod, grants: PodGrants, container: str) -> None:
        """Refuse (DevicePluginError) when `grants` for `pod` would overfill a card here.

        `container` names the container being served, for the message.
        """
        holders = self.holders(excluding_uid=pod.uid)
        others = _per_card(holders)
        for uuid, amount in pod_footprint(grants, pod.init_count).items():
            card = self._gpus.card(uuid)
            if card is None:
                raise DevicePluginError(
                    f"container {container}: granted card {uuid} is not a GPU of node "
                    f"{self._node} (forged or stale grant); refusing to hand it out"
                )
            held = others.get(uuid, IDLE)
            after = held + amount
            if not after.fits_in(card):
                raise DevicePluginError(
                    f"container {container}: card {uuid} would be over capacity on node "
                    f"{self._node}: this pod needs {_amount(amount)}, other pods here hold "
                    f"{_amount(held)}, the card has {card.count} slices, {card.memory} MiB, "
                    f"{card.cores}% cores ({_held_by(holders, uuid)})"
                )

    def _waiting_grants(self, pod: Pod) -> PodGrants | None:
        """The pod's grants when they count without a record: trusted, asked for, not refused."""
        if pod.annotations.get(BIND_PHASE_ANNOTATION) == FAILED or not any(
            asks_for_gpu(c, self._vendor) for c in pod.containers
        ):
            return None
        verdict = self._trust.judge(pod)
        return verdict.grants if verdict.trusted else None


def _per_card(holders: Sequence[Holder]) -> dict[str, Usage]:
    total: dict[str, Usage] = {}
    for holder in holders:
        for uuid, amount in holder.footprint.items():
            total[uuid] = total.get(uuid, IDLE) + amount
    return total


def _held_by(holders: Sequence[Holder], uuid: str) -> str:
    names = [f"{h.pod.key} by its {h.source}" for h in holders if uuid in h.footprint]
    return f"counted: {', '.join(names)}" if names else "no other pod holds it"


def _amount(usage: Usage) -> str:
    return f"{usage.slices} slices, {usage.memory} MiB, {usage.cores}% cores"
