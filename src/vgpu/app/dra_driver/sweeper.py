"""Releases prepared claims the kubelet will never unprepare: their ResourceClaim is gone, was
made again (another uid) or was deallocated, and no pod that uses it still runs on this node.
A Prepare whose answer was lost in a crash is one way to get there (the kubelet then never
counted the claim as prepared).

A claim is kept while a pod on this node that has not ended uses it (by the record's
`reservedFor`, or a pod that names the claim): a tenant can delete its ResourceClaim, taking
its finalizer off, or make another under the same name while its pod still runs on the GPU,
and that pod's share must keep counting (and keep its region directory) until the kubelet
unprepares it or the pod ends. Checked at every `interval_s`; a claim or node whose state
cannot be read now is left for the next round.
"""

import logging
import threading

from vgpu.app.dra_driver.prepare import ClaimPreparer
from vgpu.app.dra_driver.prepared import PreparedClaims
from vgpu.domain.dra import PreparedClaim
from vgpu.domain.pod import Pod
from vgpu.ports.cluster import ClusterError, ClusterPort
from vgpu.ports.dra import DraApiPort, HostFileError

log = logging.getLogger(__name__)


class ClaimSweeper:
    def __init__(
        self,
        api: DraApiPort,
        cluster: ClusterPort,
        node: str,
        prepared: PreparedClaims,
        preparer: ClaimPreparer,
        interval_s: float = 60.0,
    ) -> None:
        self._api = api
        self._cluster = cluster
        self._node = node
        self._prepared = prepared
        self._preparer = preparer
        self._interval = interval_s

    def sweep(self) -> list[str]:
        """One round; the `namespace/name` of the claims released."""
        released: list[str] = []
        running: list[Pod] | None = None
        for uid, claim in self._prepared.entries().items():
            try:
                manifest = self._api.get_claim(claim.namespace, claim.name)
            except ClusterError as exc:
                log.warning("cannot read claim %s (%s); checked again later", claim.key, exc)
                continue
            why = _gone(manifest, uid)
            if not why:
                continue
            if running is None:
                try:
                    running = [p for p in self._cluster.list_pods(self._node) if not p.is_finished]
                except ClusterError as exc:
                    log.warning("cannot list this node's pods (%s); claims checked later", exc)
                    return released
            user = _user(claim, running)
            if user is not None:
                log.info("claim %s (uid %s) %s, but pod %s still runs here with it: its GPU "
                         "shares stay counted", claim.key, uid, why, user.key)
                continue
            log.info("claim %s (uid %s) %s: releasing its GPU shares", claim.key, uid, why)
            self._preparer.release(uid, f"claim {claim.key}")
            released.append(claim.key)
        return released

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval):
            try:
                self.sweep()
            except HostFileError as exc:
                log.error("releasing prepared claims failed: %s", exc)
            except Exception:  # keep sweeping: one bad round must not end the loop
                log.exception("the prepared-claims sweep failed")


def _gone(manifest: dict[str, object] | None, uid: str) -> str:
    if manifest is None:
        return "no longer exists"
    meta = manifest.get("metadata")
    if not isinstance(meta, dict) or meta.get("uid") != uid:
        return "was deleted and made again"
    status = manifest.get("status")
    if not isinstance(status, dict) or not status.get("allocation"):
        return "is no longer allocated"
    return ""


def _user(claim: PreparedClaim, running: list[Pod]) -> Pod | None:
    """A pod of `running` that uses the claim: one it was reserved for when prepared, or one
    that names it."""
    reserved = {c.uid for c in claim.consumers if c.resource == "pods" and not c.api_group}
    for pod in running:
        if pod.uid in reserved:
            return pod
        if pod.namespace == claim.namespace and any(c.claim == claim.name for c in pod.claims):
            return pod
    return None
