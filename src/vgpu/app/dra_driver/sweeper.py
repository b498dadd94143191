"""Releases prepared claims the kubelet will never unprepare: their ResourceClaim is gone, was
made again (another uid) or was deallocated. A Prepare whose answer was lost in a crash is one
way to get there (the kubelet then never counted the claim as prepared). Checked at every
`interval_s`; a claim that cannot be read now is left for the next round."""

import logging
import threading

from vgpu.app.dra_driver.prepare import ClaimPreparer
from vgpu.app.dra_driver.prepared import PreparedClaims
from vgpu.ports.cluster import ClusterError
from vgpu.ports.dra import DraApiPort, HostFileError

log = logging.getLogger(__name__)


class ClaimSweeper:
    def __init__(
        self,
        api: DraApiPort,
        prepared: PreparedClaims,
        preparer: ClaimPreparer,
        interval_s: float = 60.0,
    ) -> None:
        self._api = api
        self._prepared = prepared
        self._preparer = preparer
        self._interval = interval_s

    def sweep(self) -> list[str]:
        """One round; the `namespace/name` of the claims released."""
        released = []
        for uid, claim in self._prepared.entries().items():
            try:
                manifest = self._api.get_claim(claim.namespace, claim.name)
            except ClusterError as exc:
                log.warning("cannot read claim %s (%s); checked again later", claim.key, exc)
                continue
            why = _gone(manifest, uid)
            if why:
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
