"""Allocate: turn the scheduler's grants on the pod into the answers the kubelet hands the
container.

The pod served is a waiting pod whose grant the plugin trusts (`pod_search`, `pending`, `trust`);
waiting pods whose grant it does not trust are refused as they are found. Its whole grant must
fit the plugin's own node ledger (`nodeledger`). Then, for each container the kubelet asks
about, the next non-empty segment of `hami.io/vgpu-devices-to-allocate` is checked (`segments`)
and answered: HAMi-core's envs and mounts for shared cards (`hamicore_answer`), the reserved MIG
instances for cards in MIG mode (`mig_serving`). Before any answer leaves, the pod's whole grant
is saved in the served record (`served_recorder`): when that cannot be saved, nothing is served.
The answered segments are emptied in one patch (`allocate_patch`); when no segment is left the
pod's bind phase becomes `success` and the node lock is released (`bind_phase`). Every refusal
sets bind phase `failed`, records a GPUAllocationFailed event on the pod, releases its lock, and
answers the kubelet with the reason; MIG instances the failed call made are destroyed again.
"""

import logging
import threading
from collections.abc import Sequence

from vgpu.app.device_plugin.allocate_patch import AllocatePatch
from vgpu.app.device_plugin.bind_phase import BindPhase
from vgpu.app.device_plugin.hamicore_answer import HamiCoreAnswers
from vgpu.app.device_plugin.keyring import KeyRingUnavailable
from vgpu.app.device_plugin.mig_serving import MigCall, MigServing, with_runtime
from vgpu.app.device_plugin.nodeledger import NodeLedger
from vgpu.app.device_plugin.pod_search import PodSearch
from vgpu.app.device_plugin.segments import Segments
from vgpu.app.device_plugin.served_recorder import ServedRecorder
from vgpu.app.device_plugin.trust import container_label, pod_grants
from vgpu.domain.errors import DomainError
from vgpu.domain.grant import ContainerGrant, PodGrants
from vgpu.domain.pod import Pod
from vgpu.domain.trust import GrantClaim
from vgpu.domain.vendor import Vendor
from vgpu.ports.cluster import ClusterError
from vgpu.ports.kubelet import ContainerResponse, DevicePluginError
from vgpu.ports.served import RecordError

log = logging.getLogger(__name__)


class Allocator:
    """Serves Allocate calls for one node. Calls are serialised: each rewrites the pod."""

    def __init__(
        self,
        vendor: Vendor,
        search: PodSearch,
        ledger: NodeLedger,
        segments: Segments,
        hami_core: HamiCoreAnswers,
        mig: MigServing,
        recorder: ServedRecorder,
        patch: AllocatePatch,
        bind_phase: BindPhase,
    ) -> None:
        self._vendor = vendor
        self._search = search
        self._ledger = ledger
        self._segments = segments
        self._hami_core = hami_core
        self._mig = mig
        self._recorder = recorder
        self._patch = patch
        self._bind_phase = bind_phase
        self._lock = threading.Lock()

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        with self._lock:
            waiting = self._search.settled()
            for refused, reason in waiting.refused:
                self._bind_phase.failed(
                    refused, f"cannot allocate GPUs for pod {refused.key}: {reason}"
                )
            pod = self._search.chosen(waiting)
            try:
                return self._serve(pod, waiting.grants, waiting.claim, requests)
            except KeyRingUnavailable as exc:
                raise self._search.unverifiable(exc) from exc
            except (DevicePluginError, DomainError, ClusterError, RecordError) as exc:
                self._bind_phase.failed(pod, str(exc))
                raise DevicePluginError(f"cannot allocate GPUs for pod {pod.key}: {exc}") from exc

    def pending_grants(self) -> list[ContainerGrant]:
        """The waiting pod's containers still to serve, in order (for preferred allocation)."""
        pod = self._search.chosen(self._search.now())
        return [c for c in pod_grants(pod, self._vendor.to_allocate_annotation) if c]

    def _serve(
        self,
        pod: Pod,
        allocated: PodGrants,
        claim: GrantClaim | None,
        requests: Sequence[Sequence[str]],
    ) -> list[ContainerResponse]:
        grants = list(pod_grants(pod, self._vendor.to_allocate_annotation))
        first = next((i for i, c in enumerate(grants) if c), 0)
        self._ledger.check(pod, allocated, container_label(pod, first))
        call = MigCall()
        try:
            return self._serve_containers(pod, requests, grants, call, claim)
        except BaseException:
            self._mig.undo(call, pod)
            raise

    def _serve_containers(
        self,
        pod: Pod,
        requests: Sequence[Sequence[str]],
        grants: list[ContainerGrant],
        call: MigCall,
        claim: GrantClaim | None,
    ) -> list[ContainerResponse]:
        answers = []
        served = []
        for device_ids in requests:
            index = self._segments.next_index(grants, device_ids)
            container = self._segments.container(pod, index)
            segment = grants[index]
            self._segments.check(container.name, device_ids, segment)
            if self._mig.in_mig_mode(container.name, segment):
                answers.append(self._mig.answer(pod, index, container, segment, call))
            else:
                answers.append(self._hami_core.answer(pod, container, segment))
            served.append((container.name, segment))
            grants[index] = ()
        self._recorder.record(pod, claim, call.runtimes())
        self._patch.write(pod, grants, with_runtime(pod, call) if call.served else None)
        for (name, segment), answer in zip(served, answers, strict=True):
            log.info(
                "Allocate for pod %s container %s: %s; envs %s; mounts %s",
                pod.key,
                name,
                ", ".join(f"{g.uuid} {g.memory} MiB {g.cores}% cores" for g in segment),
                " ".join(f"{k}={v}" for k, v in sorted(answer.envs.items())),
                ", ".join(f"{m.host_path}->{m.container_path}" for m in answer.mounts),
            )
        if not any(grants):
            self._bind_phase.completed(pod)
        return answers
