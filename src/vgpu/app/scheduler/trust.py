"""Which grants written on pods the scheduler believes: the domain's rule
(`vgpu.domain.grant_trust`) with this replica's key ring, or its own name with signing off.
"""

from collections.abc import Callable

from vgpu.domain import Pod, Vendor
from vgpu.domain.grant_trust import GrantVerdict, NamedSchedulers, Signatures, judge_grant
from vgpu.domain.signing import GRANT_SIGNATURE_ANNOTATION, GrantClaim, KeyRing


def grant_identity(claim: GrantClaim) -> str:
    """Names one scheduling decision (node, time, cards, MIG placements) to remember it as
    revoked: two decisions in one second for the same cards differ by their placements."""
    return f"{claim.node}|{claim.assigned_time}|{claim.allocated}|{claim.mig_reservations}"


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

    def judge(self, pod: Pod) -> GrantVerdict:
        rule = (
            NamedSchedulers(frozenset({self._scheduler_name}))
            if self._ring is None
            else Signatures(self._ring())
        )
        return judge_grant(pod, self._vendor, rule)

    def sign(self, claim: GrantClaim) -> dict[str, str]:
        """The signature annotation for a grant this scheduler writes ({} with signing off)."""
        if self._ring is None:
            return {}
        ring = self._ring()
        if ring is None:
            raise RuntimeError("no grant signing key is loaded; the replica is not ready")
        return {GRANT_SIGNATURE_ANNOTATION: ring.sign(claim)}
