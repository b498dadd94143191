"""Allocate: turn the scheduler's grants on the pod into HAMi-core envs and mounts.

The pod served is a waiting pod whose grant the plugin trusts (signed by the scheduler, see
`trust` and `pending`); waiting pods whose grant it does not trust are refused as they are found.
For each container the kubelet asks about, the next non-empty segment of
`hami.io/vgpu-devices-to-allocate` is checked (count, cards that exist here, and the pod's whole
grant against the plugin's own node ledger), answered with the domain's allocation, and emptied
in the annotation. Before any answer leaves, the pod's whole grant is saved in the served record
(`served`), which keeps it counted until the pod ends; when that cannot be saved, nothing is
served. A container granted cards in MIG mode gets instead the MIG instances reserved
for it in `hami.io/vgpu-mig-allocations` (made or reused by `migmanager`), and that annotation
gains their runtime identity in the same patch. When no segment is left the pod's bind phase
becomes `success` and the node lock is released. Every refusal sets bind phase `failed`,
records a GPUAllocationFailed event on the pod, releases its lock, and answers the kubelet with
the reason; MIG instances the failed call made are destroyed again.
"""

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.app.device_plugin.keyring import KeyRingUnavailable
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.nodeledger import NodeLedger
from vgpu.app.device_plugin.pending import FAILED, SUCCESS, Waiting, find_pending_pod
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.trust import NodeGrantTrust, container_label, pod_grants
from vgpu.app.preconditioned_patch import Outcome, patch_preconditioned
from vgpu.domain.allocation import AllocationConfig, AllocationInput, allocate_container
from vgpu.domain.codec import encode_pod_grants
from vgpu.domain.device import MIG_MODE
from vgpu.domain.errors import DomainError, RequestError
from vgpu.domain.grant import ContainerGrant, PodGrants
from vgpu.domain.mig import MigInstance
from vgpu.domain.mig_allocations import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigReservation,
    MigRuntime,
    decode_mig_allocations,
    encode_mig_allocations,
)
from vgpu.domain.mig_lifecycle import container_reservations
from vgpu.domain.pod import Container, Pod
from vgpu.domain.request import parse_request
from vgpu.domain.signing import GrantClaim
from vgpu.domain.vendor import BIND_PHASE_ANNOTATION, Vendor
from vgpu.ports.cluster import ClusterError, ClusterPort
from vgpu.ports.gpu import GpuUnavailable, MigError
from vgpu.ports.kubelet import ContainerResponse, DevicePluginError
from vgpu.ports.served import RecordError

log = logging.getLogger(__name__)

SETTLE_POLL_S = 0.05


@dataclass
class _MigCall:
    """The MIG instances one Allocate call serves, by reservation, and those it created."""

    served: dict[tuple[int, int], MigInstance] = field(default_factory=dict)
    created: list[MigInstance] = field(default_factory=list)


class Allocator:
    """Serves Allocate calls for one node. Calls are serialised: each rewrites the pod."""

    def __init__(
        self,
        cluster: ClusterPort,
        gpus: GpuState,
        node: str,
        config: AllocationConfig,
        host: HostDirs,
        vendor: Vendor,
        trust: NodeGrantTrust,
        ledger: NodeLedger,
        served: ServedRecord,
        new_cache_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        settle_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        mig: MigManager | None = None,
    ) -> None:
        """`settle_s`: how long to wait for a trusted pod to show up in the cluster port's
        cache before refusing (the kubelet may see a bound pod a moment before the plugin).
        `mig`: the MIG instance manager, None where the GPU port cannot make instances."""
        self._cluster = cluster
        self._gpus = gpus
        self._node = node
        self._config = config
        self._host = host
        self._vendor = vendor
        self._trust = trust
        self._ledger = ledger
        self._served = served
        self._new_cache_id = new_cache_id
        self._settle_s = settle_s
        self._sleep = sleep
        self._mig = mig
        self._lock = threading.Lock()

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        with self._lock:
            waiting = self._settled_search()
            for refused, reason in waiting.refused:
                self._fail(refused, f"cannot allocate GPUs for pod {refused.key}: {reason}")
            pod = self._chosen(waiting)
            try:
                return self._serve(pod, waiting.grants, waiting.claim, requests)
            except KeyRingUnavailable as exc:
                raise self._unverifiable(exc) from exc
            except (DevicePluginError, DomainError, ClusterError, RecordError) as exc:
                self._fail(pod, str(exc))
                raise DevicePluginError(f"cannot allocate GPUs for pod {pod.key}: {exc}") from exc

    def pending_grants(self) -> list[ContainerGrant]:
        """The waiting pod's containers still to serve, in order (for preferred allocation)."""
        pod = self._chosen(self._search())
        return [c for c in pod_grants(pod, self._vendor.to_allocate_annotation) if c]

    # internals -------------------------------------------------------------------------------
    def _search(self) -> Waiting:
        try:
            return find_pending_pod(self._cluster, self._node, self._vendor, self._trust)
        except ClusterError as exc:
            raise DevicePluginError(f"cannot look up pods on node {self._node}: {exc}") from exc
        except KeyRingUnavailable as exc:
            raise self._unverifiable(exc) from exc

    def _unverifiable(self, exc: KeyRingUnavailable) -> DevicePluginError:
        """No key ring: refuse the call but fail no pod, since none could be judged."""
        return DevicePluginError(f"cannot verify grants on node {self._node}: {exc}")

    def _settled_search(self) -> Waiting:
        waited = 0.0
        waiting = self._search()
        while waiting.chosen is None and waited < self._settle_s:
            self._sleep(SETTLE_POLL_S)
            waited += SETTLE_POLL_S
            waiting = self._search()
        return waiting

    def _chosen(self, waiting: Waiting) -> Pod:
        if waiting.chosen is not None:
            return waiting.chosen
        if waiting.refused:
            reasons = "; ".join(f"{pod.key}: {reason}" for pod, reason in waiting.refused)
            raise DevicePluginError(
                f"no pod on node {self._node} waits with a grant this plugin can trust, "
                f"refused: {reasons}"
            )
        raise DevicePluginError(
            f"no pod on node {self._node} is waiting for GPUs: expected a Pending pod bound "
            f"here with hami.io/bind-phase=allocating and grants left in "
            f"{self._vendor.to_allocate_annotation} (was it scheduled by vgpu?)"
        )

    def _serve(
        self,
        pod: Pod,
        allocated: PodGrants,
        claim: GrantClaim | None,
        requests: Sequence[Sequence[str]],
    ) -> list[ContainerResponse]:
        key = self._vendor.to_allocate_annotation
        grants = list(pod_grants(pod, key))
        first = next((i for i, c in enumerate(grants) if c), 0)
        self._ledger.check(pod, allocated, container_label(pod, first))
        mig = _MigCall()
        try:
            return self._serve_containers(pod, requests, grants, mig, claim)
        except BaseException:
            if mig.created and self._mig is not None:
                self._mig.undo(mig.created, pod.key)
            raise

    def _serve_containers(
        self,
        pod: Pod,
        requests: Sequence[Sequence[str]],
        grants: list[ContainerGrant],
        mig: _MigCall,
        claim: GrantClaim | None,
    ) -> list[ContainerResponse]:
        key = self._vendor.to_allocate_annotation
        answers = []
        served = []
        for device_ids in requests:
            index = next((i for i, c in enumerate(grants) if c), None)
            if index is None:
                raise DevicePluginError(
                    f"the kubelet asks for {len(device_ids)} device(s) but {key} has no "
                    "container left to serve"
                )
            container = self._container(pod, index)
            segment = grants[index]
            if len(device_ids) != len(segment):
                raise DevicePluginError(
                    f"container {container.name!r}: the kubelet asks for {len(device_ids)} "
                    f"device(s) but the scheduler granted {len(segment)} "
                    f"({', '.join(g.uuid for g in segment)})"
                )
            self._check_advertised(container.name, device_ids)
            self._check_cards(container.name, segment)
            if self._in_mig_mode(container.name, segment):
                answers.append(self._mig_answer(pod, index, container, segment, mig))
            else:
                answers.append(self._answer(pod, container, segment))
            served.append((container.name, segment))
            grants[index] = ()
        remaining = encode_pod_grants(tuple(grants))
        complete = not any(grants)
        patch = {key: remaining}
        if complete:
            patch[BIND_PHASE_ANNOTATION] = SUCCESS
        self._record(pod, claim)
        if mig.served:
            self._patch_with_runtime(pod, patch, mig)
        else:
            self._cluster.patch_pod_annotations(pod.namespace, pod.name, patch)
        for (name, segment), answer in zip(served, answers, strict=True):
            log.info(
                "Allocate for pod %s container %s: %s; envs %s; mounts %s",
                pod.key,
                name,
                ", ".join(f"{g.uuid} {g.memory} MiB {g.cores}% cores" for g in segment),
                " ".join(f"{k}={v}" for k, v in sorted(answer.envs.items())),
                ", ".join(f"{m.host_path}->{m.container_path}" for m in answer.mounts),
            )
        if complete:
            self._release_lock(pod)
            log.info("pod %s has all its GPUs: bind phase %s, node lock released", pod.key, SUCCESS)
        return answers

    def _record(self, pod: Pod, claim: GrantClaim | None) -> None:
        """Save the pod's grant in the served record before anything is answered."""
        if claim is None:  # a trusted grant always has its claim; refuse rather than forget
            raise DevicePluginError(f"no grant claim to record for pod {pod.key}")
        try:
            self._served.add(pod, claim, self._trust.signed(pod))
        except RecordError as exc:
            raise DevicePluginError(
                f"{exc}; nothing is served without a record, which keeps the grant counted "
                "across restarts"
            ) from exc

    def _container(self, pod: Pod, index: int) -> Container:
        if index >= len(pod.containers):
            raise DevicePluginError(
                f"{self._vendor.to_allocate_annotation} has grants for container #{index} but "
                f"the pod has only {len(pod.containers)} container(s)"
            )
        return pod.containers[index]

    def _check_advertised(self, container: str, device_ids: Sequence[str]) -> None:
        """The kubelet asks only for devices this plugin advertised: any other id means its
        count of what it handed out is not ours, so the container is refused (as HAMi refuses
        an unknown MIG device)."""
        unknown = [i for i in device_ids if self._gpus.physical_uuid(i) is None]
        if unknown:
            raise DevicePluginError(
                f"container {container!r}: the kubelet asks for unknown device(s) "
                f"{', '.join(unknown)}, which this plugin never advertised"
            )

    def _check_cards(self, container: str, segment: ContainerGrant) -> None:
        for grant in segment:
            if grant.vendor != self._vendor.word:
                raise DevicePluginError(
                    f"container {container!r}: card {grant.uuid} is granted as vendor "
                    f"{grant.vendor!r}, not {self._vendor.word!r}"
                )

    def _in_mig_mode(self, container: str, segment: ContainerGrant) -> bool:
        """Whether the container's cards are in MIG mode here; refused when only some are."""
        cards = {g.uuid: self._gpus.card(g.uuid) for g in segment}
        mig = [u for u, card in cards.items() if card is not None and card.mode == MIG_MODE]
        shared = [u for u in cards if u not in mig]
        if mig and shared:
            raise DevicePluginError(
                f"container {container!r} is granted MIG card(s) {', '.join(mig)} and shared "
                f"card(s) {', '.join(shared)}; a container gets MIG instances or HAMi-core "
                "slices, not both"
            )
        return bool(mig)

    def _mig_answer(
        self, pod: Pod, index: int, container: Container, segment: ContainerGrant, mig: _MigCall
    ) -> ContainerResponse:
        """The container's reserved MIG instances, made or reused: `NVIDIA_VISIBLE_DEVICES`
        lists their MIG UUIDs and nothing of HAMi-core is added
        (docs/protocol.md#mig-operating-mode)."""
        if self._mig is None:
            raise DevicePluginError(
                f"container {container.name!r} is granted MIG cards but this plugin's GPU "
                "access cannot make MIG instances"
            )
        text = pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, "")
        wanted = container_reservations(
            decode_mig_allocations(text), index, container.name, [g.uuid for g in segment]
        )
        try:
            realized = self._mig.realize(pod, wanted)
        except (MigError, GpuUnavailable) as exc:
            raise DevicePluginError(f"container {container.name!r}: {exc}") from exc
        mig.created += realized.created
        for reservation, instance in zip(wanted, realized.instances, strict=True):
            mig.served[reservation.key] = instance
        uuids = ",".join(i.mig_uuid for i in realized.instances)
        return ContainerResponse(envs={"NVIDIA_VISIBLE_DEVICES": uuids})

    def _patch_with_runtime(self, pod: Pod, patch: dict[str, str], mig: _MigCall) -> None:
        """The Allocate patch plus each served reservation's runtime identity, applied only to
        the pod version the reservations were read from. When the pod changed meanwhile (a
        status update) but neither its grant nor its reservations did, once more on the
        fresh version."""
        text = pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, "")
        patch[MIG_ALLOCATIONS_ANNOTATION] = encode_mig_allocations(
            [_with_runtime(r, mig.served.get(r.key)) for r in decode_mig_allocations(text)]
        )
        written = patch_preconditioned(
            self._cluster, pod, patch, unchanged=self._same_grant, settle=False
        )
        if written.outcome is not Outcome.WRITTEN:
            raise DevicePluginError(written.detail)

    def _same_grant(self, before: Pod, current: Pod) -> bool:
        """Whether the pod still has the grant and the reservations the call served."""
        keys = (self._vendor.to_allocate_annotation, MIG_ALLOCATIONS_ANNOTATION)
        return all(current.annotations.get(k) == before.annotations.get(k) for k in keys)

    def _answer(self, pod: Pod, container: Container, segment: ContainerGrant) -> ContainerResponse:
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

    def _fail(self, pod: Pod, reason: str) -> None:
        log.error("Allocate for pod %s failed: %s", pod.key, reason)
        try:
            self._cluster.patch_pod_annotations(
                pod.namespace, pod.name, {BIND_PHASE_ANNOTATION: FAILED}
            )
            self._cluster.record_event(
                pod.namespace, pod.name, "GPUAllocationFailed", reason, warning=True
            )
        except ClusterError as exc:
            log.error("could not mark pod %s as failed: %s", pod.key, exc)
        self._release_lock(pod)

    def _release_lock(self, pod: Pod) -> None:
        try:
            self._cluster.release_node_lock(self._node, pod.namespace, pod.name)
        except ClusterError as exc:
            log.error("could not release the lock on node %s for %s: %s", self._node, pod.key, exc)


def _with_runtime(reservation: MigReservation, instance: MigInstance | None) -> MigReservation:
    if instance is None:
        return reservation
    runtime = MigRuntime(instance.mig_uuid, instance.gpu_instance_id, instance.compute_instance_id)
    return replace(reservation, runtime=runtime)
