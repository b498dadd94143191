"""Which grants written on pods the scheduler counts: only those the cluster vouches for.

A pod's `hami.io/vgpu-devices-allocated` charges the ledger only when

- signing is on: `vgpu.io/grant-signature` verifies, with a key of the ring, for exactly this
  pod's uid, `hami.io/vgpu-node`, `hami.io/vgpu-time` and the allocated text; or
- signing is off: the pod names this scheduler in `spec.schedulerName`;

and, in both cases, once the pod is bound, `spec.nodeName` equals `hami.io/vgpu-node`.
Anyone who can edit a pod can write annotations; nobody without the key can sign them, and a
signature copied from another pod, node or amount does not verify. The device plugin applies
the same rule (`vgpu.domain.signing.grant_claim` builds every claim, for signing and checking).
"""

from collections.abc import Callable
from dataclasses import dataclass

from vgpu.domain import Pod, Vendor
from vgpu.domain.signing import GRANT_SIGNATURE_ANNOTATION, GrantClaim, KeyRing, grant_claim


def grant_identity(claim: GrantClaim) -> str:
    """Names one scheduling decision (node, time, cards, MIG placements) to remember it as
    revoked: two decisions in one second for the same cards differ by their placements."""
    return f"{claim.node}|{claim.assigned_time}|{claim.allocated}|{claim.mig_reservations}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a pod's annotations claim (None: nothing) and why it is not trusted ('' if it is)."""

    claim: GrantClaim | None
    problem: str = ""


class GrantTrust:
    """Judges pods' grants. `ring` gives the current key ring; None means signing is off."""

    def __init__(
        self,
        vendor: Vendor,
        scheduler_name: str,
        ring: Callable[[], KeyRing | None] | None,
    ) -> None:
        self._vendor = vendor
        self._scheduler_name = scheduler_name
        self._ring = ring

    def judge(self, pod: Pod) -> Verdict:
        claim = grant_claim(pod.uid, pod.annotations, self._vendor)
        if claim is None:
            return Verdict(None)
        if pod.node_name and pod.node_name != claim.node:
            return Verdict(
                claim, f"it is bound to {pod.node_name} but its grant names node {claim.node}"
            )
        if self._ring is None:
            if pod.scheduler_name != self._scheduler_name:
                return Verdict(
                    claim,
                    f"it names scheduler {pod.scheduler_name or '(none)'!r}, "
                    f"not {self._scheduler_name!r}",
                )
            return Verdict(claim)
        ring = self._ring()
        if ring is None:
            return Verdict(claim, "no grant signing key is loaded yet")
        if not ring.verify(pod.annotations.get(GRANT_SIGNATURE_ANNOTATION), claim):
            return Verdict(claim, f"its {GRANT_SIGNATURE_ANNOTATION} does not verify")
        return Verdict(claim)

    def sign(self, claim: GrantClaim) -> dict[str, str]:
        """The signature annotation for a grant this scheduler writes ({} with signing off)."""
        if self._ring is None:
            return {}
        ring = self._ring()
        if ring is None:
            raise RuntimeError("no grant signing key is loaded; the replica is not ready")
        return {GRANT_SIGNATURE_ANNOTATION: ring.sign(claim)}
