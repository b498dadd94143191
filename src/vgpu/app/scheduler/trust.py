"""Which grants written on pods the scheduler believes, and which occupy cards: the domain's
rules (`vgpu.domain.trust.grant_trust`, `vgpu.domain.trust.occupancy`) with this replica's key
ring, or with the schedulers it trusts by name when signing is off.

While a cluster is taken over from HAMi (`takeover.from_hami`), grants on pods that name one of
HAMi's schedulers are believed unsigned too, so HAMi's pending pods reserve their cards.
"""

from collections.abc import Callable

from vgpu.domain import Pod, Vendor
from vgpu.domain.trust import (
    GRANT_SIGNATURE_ANNOTATION,
    GrantClaim,
    KeyRing,
    NamedSchedulers,
    Occupancy,
    Signatures,
    judge_occupancy,
)


def grant_identity(claim: GrantClaim) -> str:
    """Names one scheduling decision (node, time, cards, MIG placements) to remember it as
    revoked: two decisions in one second for the same cards differ by their placements."""
    return f"{claim.node}|{claim.assigned_time}|{claim.allocated}|{claim.mig_reservations}"


class GrantTrust:
    """Judges pods' grants. `ring` gives the current key ring; None means signing is off.
    `unsigned_from` names schedulers whose grants are believed without a signature (HAMi's,
    during a takeover)."""

    def __init__(
        self,
        vendor: Vendor,
        scheduler_name: str,
        ring: Callable[[], KeyRing | None] | None,
        unsigned_from: frozenset[str] = frozenset(),
    ) -> None:
        self._vendor = vendor
        self._scheduler_name = scheduler_name
        self._ring = ring
        self._unsigned_from = unsigned_from

    def _rule(self) -> Signatures | NamedSchedulers:
        if self._ring is None:
            return NamedSchedulers(frozenset({self._scheduler_name}) | self._unsigned_from)
        return Signatures(self._ring(), self._unsigned_from)

    def occupancy(self, pod: Pod) -> Occupancy:
        """Whether the pod's grant, as its annotations say now, occupies cards; its `verdict`
        says whether it is believed (all a pending pod may claim)."""
        return judge_occupancy(pod, self._vendor, self._rule())

    def sign(self, claim: GrantClaim) -> dict[str, str]:
        """The signature annotation for a grant this scheduler writes ({} with signing off)."""
        if self._ring is None:
            return {}
        ring = self._ring()
        if ring is None:
            raise RuntimeError("no grant signing key is loaded; the replica is not ready")
        return {GRANT_SIGNATURE_ANNOTATION: ring.sign(claim)}
