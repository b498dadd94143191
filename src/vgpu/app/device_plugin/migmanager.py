"""The MIG instances of this node's pods: made on Allocate, destroyed when their pod goes.

Pod annotations are the truth (docs/protocol.md#mig-instance-lifecycle): the reservations in
`hami.io/vgpu-mig-allocations` of this node's active pods (not finished, not being deleted) are
desired, where the pod's grant is trusted (`trust.NodeGrantTrust`: signed, reservations included).
A reservation nobody vouches for claims nothing: it cannot keep another pod's instance alive,
adopt it at start, or stall the release of every instance on the node with unreadable text.
What was served vouches too: an active pod the served record (`served`) holds desires the
reservations it was served under, with the instances it was given, whatever its annotations say
now, so a tenant that garbles its own pod's signature or reservations cannot have the instances
destroyed under it, nor leave them behind unmanaged after a restart.
The rules live in `vgpu.domain.mig.lifecycle`; this class applies them through the MIG port,
one step at a time under one lock:

- `start`: adopt the instances that active pods record with their full runtime identity, and
  destroy the others only on MIG GPUs no active reservation names. A failed read of pods or
  instances leaves everything as it is and is tried again by the next `reconcile`.
- `reconcile` (every `interval_s` and before each Allocate): destroy each managed instance whose
  pod no longer desires it. When the pods, the served record or an annotation cannot be read,
  nothing is destroyed that cycle (fail closed).
- `realize` (Allocate): the pod's instances for one container, reused or created; on a failure
  the ones this call created are destroyed again.

The GPUs' MIG mode is never switched here: that is the operator's (`nvidia-smi -mig 1`).
"""

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.keyring import KeyRingUnavailable
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.errors import CodecError
from vgpu.domain.mig import (
    MIG_ALLOCATIONS_ANNOTATION,
    Managed,
    MigInstance,
    MigKey,
    MigReservation,
    MigReservationError,
    PodReservation,
    decode_mig_allocations,
    describe_instance,
    plan_placement,
    start_plan,
    to_release,
)
from vgpu.domain.pod import Pod
from vgpu.ports.cluster import ClusterError, ClusterPort
from vgpu.ports.gpu import GpuUnavailable, MigError, MigPort
from vgpu.ports.served import RecordError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Realized:
    """A container's instances in device order, and those of them this call created."""

    instances: tuple[MigInstance, ...]
    created: tuple[MigInstance, ...]


class MigManager:
    def __init__(
        self,
        port: MigPort,
        cluster: ClusterPort,
        node: str,
        gpus: GpuState,
        trust: NodeGrantTrust,
        served: ServedRecord,
        interval_s: float = 5.0,
    ) -> None:
        self._port = port
        self._cluster = cluster
        self._node = node
        self._gpus = gpus
        self._trust = trust
        self._served = served
        self._interval = interval_s
        self._lock = threading.Lock()
        self._managed: dict[MigKey, Managed] = {}
        self._started = False

    @property
    def active(self) -> bool:
        """Whether this node has GPUs registered in MIG mode (else there is nothing to do)."""
        return bool(self._gpus.mig_uuids())

    def managed(self) -> list[Managed]:
        with self._lock:
            return list(self._managed.values())

    def start(self) -> bool:
        """Adopt and clean up once; False (logged) when pods or instances cannot be read."""
        with self._lock:
            return self._start()

    def reconcile(self) -> bool:
        """Release what no active pod desires; False when the cycle was skipped."""
        with self._lock:
            return self._reconcile() is not None

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval):
            try:
                self.reconcile()
            except Exception:  # the loop that frees MIG slices must survive a surprise
                log.exception("MIG reconciliation failed")

    def realize(self, pod: Pod, reservations: Sequence[MigReservation]) -> Realized:
        """The instances for `reservations` of `pod`, in order. Raises MigError,
        MigReservationError or GpuUnavailable, after destroying what this call created."""
        with self._lock:
            desired = self._reconcile()
            if desired is None:
                raise MigError(
                    f"cannot read the MIG reservations of node {self._node}'s pods; "
                    "no instance is made while they are unknown"
                )
            live = self._port.mig_instances()
            made: list[MigInstance] = []
            served = []
            try:
                for reservation in reservations:
                    wanted = PodReservation(pod.uid, pod.key, reservation)
                    plan = plan_placement(wanted, self._managed.values(), live, desired)
                    if plan.reuse is not None:
                        self._manage(Managed(plan.reuse, pod.uid, pod.key), "reused")
                        served.append(plan.reuse)
                        continue
                    for leftover in plan.clear:
                        why = f"left over in the slices reserved for pod {pod.key}"
                        if not self._destroy(leftover, why, None):
                            raise MigError(
                                f"MIG instance {leftover.mig_uuid} sits in the slices reserved "
                                f"for pod {pod.key} and cannot be destroyed"
                            )
                        live.remove(leftover)
                    instance = self._port.create_mig_instance(
                        reservation.gpu_uuid, reservation.profile, reservation.placement
                    )
                    made.append(instance)
                    live.append(instance)
                    self._manage(Managed(instance, pod.uid, pod.key), "created")
                    served.append(instance)
            except (MigError, MigReservationError, GpuUnavailable):
                self._undo(made, pod.key)
                raise
            return Realized(tuple(served), tuple(made))

    def undo(self, instances: Sequence[MigInstance], pod: str) -> None:
        """Destroy instances `realize` made for `pod` whose Allocate failed later on."""
        with self._lock:
            self._undo(instances, pod)

    # internals (the lock is held) -----------------------------------------------------------
    def _desired(self) -> list[PodReservation]:
        """Reservations of this node's active pods: those of trusted grants (with the runtime
        identity the pod records), else those the pod was served under. ClusterError,
        RecordError or MigReservationError (an annotation that does not read, or no grant keys
        to judge by) when they are not known."""
        pods = self._cluster.list_pods(self._node)
        served = self._served.entries()
        desired = []
        for pod in pods:
            if pod.is_finished or pod.deleting or pod.node_name != self._node:
                continue
            text = pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, "")
            if not text or not self._trusted(pod):
                entry = served.get(pod.uid)
                text = "" if entry is None else entry.grant.mig_reservations
                if text:
                    log.debug("pod %s: MIG reservations as the served record has them", pod.key)
            if not text:
                continue
            try:
                reservations = decode_mig_allocations(text)
            except CodecError as exc:
                raise MigReservationError(f"pod {pod.key}: {exc}") from exc
            desired += [PodReservation(pod.uid, pod.key, r) for r in reservations]
        return desired

    def _trusted(self, pod: Pod) -> bool:
        try:
            problem = self._trust.problem(pod)
        except KeyRingUnavailable as exc:
            raise MigReservationError(f"pod {pod.key}: its grant cannot be checked: {exc}") from exc
        if problem is not None:
            log.debug("pod %s: its MIG reservations are not believed: %s", pod.key, problem)
        return problem is None

    def _start(self) -> bool:
        try:
            desired = self._desired()
            live = self._port.mig_instances()
        except (ClusterError, RecordError, MigReservationError, MigError, GpuUnavailable) as exc:
            log.warning("MIG start-up left every instance as it is, retrying later: %s", exc)
            return False
        plan = start_plan(desired, live, self._gpus.mig_uuids())
        for entry in plan.adopted:
            self._manage(entry, "adopted")
        for wanted in plan.lost:
            reservation = wanted.reservation
            log.warning(
                "pod %s records MIG instance %s at %s, which does not exist (any more)",
                wanted.pod,
                reservation.runtime.mig_uuid if reservation.runtime else "?",
                describe_instance(reservation.gpu_uuid, reservation.profile, reservation.placement),
            )
        for instance in plan.kept:
            log.warning(
                "MIG instance %s (%s) belongs to no pod but its GPU serves pods: left alone",
                instance.mig_uuid,
                describe_instance(instance.gpu_uuid, instance.profile, instance.placement),
            )
        for instance in plan.strays:
            self._destroy(instance, "no pod on this node uses its GPU", None)
        self._started = True
        return True

    def _reconcile(self) -> list[PodReservation] | None:
        if not self._started and not self._start():
            return None
        try:
            desired = self._desired()
        except (ClusterError, RecordError, MigReservationError) as exc:
            log.warning("MIG release skipped this cycle (nothing destroyed): %s", exc)
            return None
        for entry in to_release(self._managed.values(), desired):
            if self._destroy(entry.instance, "its pod no longer uses it", entry.pod):
                del self._managed[entry.key]
        return desired

    def _manage(self, entry: Managed, how: str) -> None:
        self._managed[entry.key] = entry
        instance = entry.instance
        log.info(
            "MIG instance %s %s for pod %s: %s, GPU instance %d, compute instance %d",
            instance.mig_uuid,
            how,
            entry.pod,
            describe_instance(instance.gpu_uuid, instance.profile, instance.placement),
            instance.gpu_instance_id,
            instance.compute_instance_id,
        )

    def _destroy(self, instance: MigInstance, why: str, pod: str | None) -> bool:
        """Destroy one instance (logged either way); False when the port refused."""
        what = f"MIG instance {instance.mig_uuid}" + (f" of pod {pod}" if pod else "")
        where = describe_instance(instance.gpu_uuid, instance.profile, instance.placement)
        try:
            self._port.destroy_mig_instance(instance)
        except (MigError, GpuUnavailable) as exc:
            log.error("%s (%s) not destroyed: %s", what, where, exc)
            return False
        log.info("%s destroyed (%s): %s", what, why, where)
        return True

    def _undo(self, instances: Sequence[MigInstance], pod: str) -> None:
        for instance in reversed(instances):
            if self._destroy(instance, "its Allocate failed", pod):
                self._managed = {k: m for k, m in self._managed.items() if m.instance != instance}
