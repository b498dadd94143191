"""Leader election with a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

Every candidate reads the Lease each `retry_period`. A candidate takes it when nobody holds
it, or when its record has not changed for the holder's `leaseDurationSeconds` as measured on
the candidate's own clock (so clock skew between machines does not matter). Updates carry the
Lease's resourceVersion, so two candidates cannot both win. The leader renews every
`retry_period` and gives up leadership when it could not renew for `renew_deadline`. On
`stop()` a leader releases the Lease (empty holder) so another candidate takes over at once.

Fencing: `is_leader` turns false the moment `renew_deadline` has passed since the start of the
last successful renewal, on the monotonic clock, even while a Lease call is still hanging; and
every Lease call times out after half the renew deadline. Another candidate can take over only
after `lease_duration` (> renew_deadline) without a change, so two replicas never both lead.
"""

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.ports.cluster import ClusterError, Conflict, NotFound

log = logging.getLogger(__name__)

LEASES = "apis/coordination.k8s.io/v1"


class Attempt(Enum):
    LEADING = "leading"  # acquired or renewed
    FOLLOWING = "following"  # another candidate holds a valid lease, or won the race
    FAILED = "failed"  # the API could not be asked


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The fields of a Lease's spec that leader election reads."""

    holder: str
    duration_s: int
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> "LeaseRecord":
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_s=_int(spec.get("leaseDurationSeconds")),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=_int(spec.get("leaseTransitions")),
        )


def may_take(record: LeaseRecord, identity: str, unchanged_for_s: float) -> bool:
    """Whether `identity` may write itself into a Lease last seen as `record`.

    `unchanged_for_s`: how long, on our clock, the record has looked the same.
    """
    if not record.holder or record.holder == identity:
        return True
    return unchanged_for_s >= record.duration_s


def next_spec(
    record: LeaseRecord | None, identity: str, duration_s: int, now: datetime
) -> dict[str, Any]:
    """The Lease spec that makes `identity` the holder: creating (`record` None), renewing, or
    taking over, which counts one more transition."""
    stamp = micro_time(now)
    if record is None:
        return {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration_s,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 0,
        }
    ours = record.holder == identity
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": duration_s,
        "acquireTime": record.acquire_time if ours else stamp,
        "renewTime": stamp,
        "leaseTransitions": record.transitions + (0 if ours else 1),
    }


def released_spec(record: LeaseRecord, now: datetime) -> dict[str, Any]:
    """The spec a leader writes when it steps down: no holder, so anyone may take it."""
    stamp = micro_time(now)
    return {
        "holderIdentity": None,
        "leaseDurationSeconds": 1,
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": record.transitions,
    }


def lease_call_timeout(renew_deadline_s: float) -> float:
    """How long one API call may take so that a hung call cannot outlive leadership."""
    return renew_deadline_s / 2


def micro_time(now: datetime) -> str:
    """Kubernetes MicroTime: RFC3339 with microseconds, UTC."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs the election on a thread; `is_leader` says whether this candidate leads now.

    `on_started_leading` / `on_stopped_leading` run when leadership is gained or lost: on the
    election thread, or on the caller's thread for `stop()`; an exception in them is logged.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        identity: str,
        name: str = "vgpu-scheduler",
        namespace: str = "kube-system",
        lease_duration_s: int = 15,
        renew_deadline_s: float = 10.0,
        retry_period_s: float = 2.0,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not identity:
            raise ValueError("leader election needs a non-empty identity")
        if not 0 < retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retry_period < renew_deadline < lease_duration; got "
                f"{retry_period_s}, {renew_deadline_s}, {lease_duration_s}"
            )
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self._api = KubeApi(api_client, timeout=lease_call_timeout(renew_deadline_s))
        self._path = object_path(namespaced("leases", namespace, LEASES), name)
        self._duration_s = lease_duration_s
        self._renew_deadline_s = renew_deadline_s
        self._retry_period_s = retry_period_s
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._leading = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    @property
    def is_leader(self) -> bool:
        """Leading, and the last renewal is younger than the renew deadline (checked now)."""
        if not self._leading.is_set():
            return False
        return self._monotonic() - self._last_renew < self._renew_deadline_s

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"vgpu-leader-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        """End the election; a leader releases the Lease unless `release` is False."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._leading.is_set():
            if release:
                self._release()
            self._lose()

    # the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        log.info(
            "leader election for lease %s/%s as %s started",
            self.namespace,
            self.name,
            self.identity,
        )
        while not self._stopping.is_set():
            started = self._monotonic()  # the lease counts from before the call, not after
            attempt = self.try_acquire_or_renew()
            now = self._monotonic()
            if attempt is Attempt.LEADING:
                self._last_renew = started
                if not self._leading.is_set():
                    self._leading.set()
                    log.info(
                        "%s became the leader (lease %s/%s)",
                        self.identity,
                        self.namespace,
                        self.name,
                    )
                    _call(self._on_started, "on_started_leading")
            elif self._leading.is_set() and (
                attempt is Attempt.FOLLOWING or now - self._last_renew >= self._renew_deadline_s
            ):
                log.warning("%s lost leadership (%s)", self.identity, attempt.value)
                self._lose()
            self._stopping.wait(self._retry_period_s)

    def try_acquire_or_renew(self) -> Attempt:
        """One round: read the Lease, and create, renew or take it over when allowed."""
        try:
            lease = self._api.get(self._path)
        except NotFound:
            return self._create()
        except ClusterError as exc:
            log.warning("reading lease %s/%s: %s", self.namespace, self.name, exc)
            return Attempt.FAILED
        spec = lease.get("spec") or {}
        record = LeaseRecord.from_spec(spec if isinstance(spec, Mapping) else {})
        now = self._monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        if not may_take(record, self.identity, now - self._observed_at):
            return Attempt.FOLLOWING
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {**_identity(lease), "name": self.name, "namespace": self.namespace},
            "spec": next_spec(record, self.identity, self._duration_s, self._wall_clock()),
        }
        return self._write(lambda: self._api.put(self._path, body))

    # internals -------------------------------------------------------------------------------
    def _create(self) -> Attempt:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": next_spec(None, self.identity, self._duration_s, self._wall_clock()),
        }
        path = namespaced("leases", self.namespace, LEASES)
        return self._write(lambda: self._api.post(path, body))

    def _write(self, send: Callable[[], dict[str, Any]]) -> Attempt:
        try:
            written = send()
        except Conflict:  # someone else wrote first
            return Attempt.FOLLOWING
        except ClusterError as exc:
            log.warning("writing lease %s/%s: %s", self.namespace, self.name, exc)
            return Attempt.FAILED
        spec = written.get("spec") or {}
        self._observed = LeaseRecord.from_spec(spec if isinstance(spec, Mapping) else {})
        self._observed_at = self._monotonic()
        return Attempt.LEADING

    def _release(self) -> None:
        try:
            lease = self._api.get(self._path)
            spec = lease.get("spec") or {}
            record = LeaseRecord.from_spec(spec if isinstance(spec, Mapping) else {})
            if record.holder != self.identity:
                return
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {**_identity(lease), "name": self.name, "namespace": self.namespace},
                "spec": released_spec(record, self._wall_clock()),
            }
            self._api.put(self._path, body)
            log.info("%s released lease %s/%s", self.identity, self.namespace, self.name)
        except ClusterError as exc:
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name, exc)

    def _lose(self) -> None:
        self._leading.clear()
        _call(self._on_stopped, "on_stopped_leading")


def _identity(lease: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata fields a replace must carry: resourceVersion (the precondition) and uid."""
    meta = lease.get("metadata") or {}
    return {key: meta[key] for key in ("resourceVersion", "uid") if key in meta}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _call(callback: Callable[[], None] | None, name: str) -> None:
    if callback is None:
        return
    try:
        callback()
    except Exception:
        log.exception("leader election callback %s failed", name)
