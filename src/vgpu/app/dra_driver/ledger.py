"""What already holds this node's GPUs when a claim is to be prepared (see
`vgpu.domain.dra.over_capacity` for the rule): the claims the driver prepared, and the pods the
device plugin served that still run on the node.

The device plugin's pods are read from the files it and the kubelet keep on the host: its
served record (`<state dir>/served.json`, read here, never written) and the kubelet's device
checkpoint; the node's pods come from the cluster's watch cache, to know which still run. A
served record or checkpoint that does not read is logged (once per distinct fault) and counts
nothing; the other still counts.
"""

import logging

from vgpu.app.dra_driver.gpus import DraGpus
from vgpu.app.dra_driver.prepared import PreparedClaims
from vgpu.domain.device import Device, Usage
from vgpu.domain.dra import GpuHolder, device_plugin_holders
from vgpu.domain.trust import holdings_by_pod
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.kubelet import CheckpointUnreadable, KubeletCheckpointPort
from vgpu.ports.served import RecordError, ServedRecordPort

log = logging.getLogger(__name__)

Footprints = dict[str, dict[str, Usage]]


class DraNodeLedger:
    def __init__(
        self,
        prepared: PreparedClaims,
        gpus: DraGpus,
        cluster: ClusterPort,
        served: ServedRecordPort,
        checkpoint: KubeletCheckpointPort,
        resource_name: str,
    ) -> None:
        self._prepared = prepared
        self._gpus = gpus
        self._cluster = cluster
        self._served = served
        self._checkpoint = checkpoint
        self._resource = resource_name
        self._faults: dict[str, str] = {}

    def holders(self, excluding_uid: str = "") -> list[GpuHolder]:
        """Everything that holds the GPUs but the claim `excluding_uid`. ClusterError when the
        node's pods cannot be listed, HostFileError when the prepared record cannot be read."""
        claims = [
            GpuHolder(f"claim {claim.key} (prepared here)", claim.footprint())
            for uid, claim in self._prepared.entries().items()
            if uid != excluding_uid
        ]
        node = self._gpus.node
        live = {p.uid: p.key for p in self._cluster.list_pods(node) if not p.is_finished}
        if not live:
            return claims
        return claims + device_plugin_holders(live, self._served_pods(), self._checkpointed())

    def _served_pods(self) -> Footprints:
        try:
            grants = self._served.load()
        except RecordError as exc:
            self._fault(self._served.location, str(exc))
            return {}
        self._fault(self._served.location, "")
        return {grant.pod_uid: grant.footprint() for grant in grants}

    def _checkpointed(self) -> Footprints:
        try:
            assignments = self._checkpoint.assignments()
        except CheckpointUnreadable as exc:
            self._fault(self._checkpoint.path, str(exc))
            return {}
        self._fault(self._checkpoint.path, "")
        if not assignments:
            return {}
        cards = {
            card.uuid: Device(card.uuid, card.index, card.type, 1, card.memory_mib, card.cores)
            for card in self._gpus.cards().values()
        }
        held = holdings_by_pod(assignments, self._resource, cards)
        return {uid: holding.footprint for uid, holding in held.items()}

    def _fault(self, where: str, fault: str) -> None:
        """Log a fault once while it lasts, and when it clears."""
        before = self._faults.get(where, "")
        if fault == before:
            return
        self._faults[where] = fault
        if fault:
            log.error("%s does not read (%s): the device plugin's pods it lists are not "
                      "counted from it", where, fault)
        else:
            log.info("%s reads again", where)
