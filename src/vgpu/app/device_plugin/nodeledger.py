"""The plugin's own count of what the pods bound to its node hold on each card.

The scheduler's ledger is not the last word: a leaked key, a second scheduler or a bug could
promise a card twice. Before serving, the plugin adds up the trusted grants of the other pods
bound here and refuses a pod whose own grant would take any card past the capacity the plugin
itself registered (split count, scaled memory, scaled cores).

A pod counts when it is not finished, is bound here, has not been refused (bind phase
`failed`: the kubelet does not start it) and its grant is trusted. The pods are read from the
cluster port, which answers from its watch cache once synced, so this costs no API call.
"""

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.pending import FAILED
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.device import IDLE, Usage
from vgpu.domain.grant import PodGrants, pod_footprint
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import BIND_PHASE_ANNOTATION, Vendor
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.kubelet import DevicePluginError


class NodeLedger:
    def __init__(
        self, cluster: ClusterPort, gpus: GpuState, node: str, vendor: Vendor, trust: NodeGrantTrust
    ) -> None:
        self._cluster = cluster
        self._gpus = gpus
        self._node = node
        self._vendor = vendor
        self._trust = trust

    def usage(self, excluding: str = "") -> dict[str, Usage]:
        """Per card, what the counted pods other than `excluding` (namespace/name) hold."""
        total: dict[str, Usage] = {}
        for pod in self._cluster.list_pods(self._node):
            grants = None if pod.key == excluding else self._counted(pod)
            if grants is None:
                continue
            footprint = pod_footprint(grants, pod.init_count)
            for uuid, amount in footprint.items():
                total[uuid] = total.get(uuid, IDLE) + amount
        return total

    def check(self, pod: Pod, grants: PodGrants, container: str) -> None:
        """Refuse (DevicePluginError) when `grants` for `pod` would overfill a card here.

        `container` names the container being served, for the message.
        """
        others = self.usage(excluding=pod.key)
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
                    f"{card.cores}% cores"
                )

    def _counted(self, pod: Pod) -> PodGrants | None:
        """The pod's grants when they count here, else None."""
        if (
            pod.is_finished
            or pod.node_name != self._node
            or pod.annotations.get(BIND_PHASE_ANNOTATION) == FAILED
        ):
            return None
        verdict = self._trust.judge(pod)
        return verdict.grants if verdict.trusted else None


def _amount(usage: Usage) -> str:
    return f"{usage.slices} slices, {usage.memory} MiB, {usage.cores}% cores"
