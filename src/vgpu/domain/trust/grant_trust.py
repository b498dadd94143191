"""Which grant written on a pod is believed: one rule for the scheduler and the device plugin.

Anyone who can edit a pod can write its annotations, so `hami.io/vgpu-devices-allocated` is
believed only when

- it reads as grants (with the MIG reservations the claim carries), a card named twice in a
  container only as MIG devices placed apart;
- once the pod is bound, `spec.nodeName` equals `hami.io/vgpu-node` (and, where the judge is a
  node's device plugin, both name that node);
- with signing on, `vgpu.io/grant-signature` verifies for exactly this pod's uid, node,
  `hami.io/vgpu-time`, device list and MIG reservations (or, while taking over from HAMi, the
  pod names HAMi's scheduler); with signing off (HAMi's scheduler does not sign), the pod names
  one of the trusted schedulers.

This decides what the device plugin serves and what a pending pod may claim. It never decides
that a bound pod's cards are free: what a running pod holds is counted from the record of what
was first seen (see the scheduler's occupancy record and the plugin's served record).

>>> from vgpu.domain.pod import Pod
>>> from vgpu.domain.vendor import NVIDIA
>>> pod = Pod("default", "p", uid="u1", scheduler_name="hami-scheduler", annotations={
...     "hami.io/vgpu-node": "n1",
...     "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,1000,10:;"})
>>> verdict = judge_grant(pod, NVIDIA, NamedSchedulers(frozenset({"hami-scheduler"})))
>>> verdict.trusted, verdict.grants[0][0].memory
(True, 1000)
>>> judge_grant(pod, NVIDIA, NamedSchedulers(frozenset({"vgpu-scheduler"}))).problem
"the pod names scheduler 'hami-scheduler', not one of the trusted schedulers (vgpu-scheduler)"
"""

from dataclasses import dataclass
from typing import Protocol

from vgpu.domain.errors import DomainError
from vgpu.domain.grant import PodGrants
from vgpu.domain.mig.allocations import decode_mig_allocations
from vgpu.domain.mig.grants import decode_granted
from vgpu.domain.pod import Pod
from vgpu.domain.trust.signing import GRANT_SIGNATURE_ANNOTATION, GrantClaim, grant_claim
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, ASSIGNED_TIME_ANNOTATION, Vendor


class Verifier(Protocol):
    """Checks a grant signature: `KeyRing`, or a cache of one that may re-read its store."""

    def verify(self, signature: str | None, claim: GrantClaim) -> bool: ...


@dataclass(frozen=True, slots=True)
class Signatures:
    """Signing on: a grant is believed when its signature verifies with `verifier`; None
    means no key ring is loaded yet, so nothing can be believed.

    `unsigned_from`: schedulers whose grants are believed without a signature, for taking a
    cluster over from HAMi (whose scheduler does not sign) while it still places pods.
    """

    verifier: Verifier | None
    unsigned_from: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class NamedSchedulers:
    """Signing off: a grant is believed on pods that name one of these schedulers."""

    names: frozenset[str]


@dataclass(frozen=True, slots=True)
class GrantVerdict:
    """What a pod's grant claims (None: it claims nothing), its grants when they read, and why
    it is not believed ('' when it is)."""

    claim: GrantClaim | None
    grants: PodGrants | None = None
    problem: str = ""

    @property
    def trusted(self) -> bool:
        return self.claim is not None and self.grants is not None and not self.problem


def claim_grants(claim: GrantClaim, vendor: Vendor) -> PodGrants:
    """The grants a claim makes, MIG instances included: CodecError when the device list is
    malformed or the MIG reservations disagree with it."""
    reservations = decode_mig_allocations(claim.mig_reservations)
    return decode_granted(claim.allocated, reservations, vendor.allocated_annotation)


def judge_grant(
    pod: Pod, vendor: Vendor, rule: Signatures | NamedSchedulers, node: str | None = None
) -> GrantVerdict:
    """Whether `pod`'s grant is believed under `rule`; with `node`, also that the pod is bound
    to that node and its grant names it (the device plugin's question).

    The verifier of `Signatures` may raise (a key store that was never read): then nothing is
    decided either way.
    """
    claim = grant_claim(pod.uid, pod.annotations, vendor)
    if claim is None:
        return GrantVerdict(None)
    try:
        grants = claim_grants(claim, vendor)
    except DomainError as exc:
        return GrantVerdict(claim, None, str(exc))
    problem = _placement_problem(pod, claim, node) or _origin_problem(pod, claim, rule)
    return GrantVerdict(claim, grants, problem)


def _placement_problem(pod: Pod, claim: GrantClaim, node: str | None) -> str:
    if node is not None and (pod.node_name != node or claim.node != node):
        return (
            f"the pod is bound to node {pod.node_name!r} and {ASSIGNED_NODE_ANNOTATION} names "
            f"{claim.node!r}; both must be this node, {node}"
        )
    if pod.node_name and pod.node_name != claim.node:
        return f"it is bound to {pod.node_name} but its grant names node {claim.node}"
    return ""


def _origin_problem(pod: Pod, claim: GrantClaim, rule: Signatures | NamedSchedulers) -> str:
    if isinstance(rule, NamedSchedulers):
        if pod.scheduler_name in rule.names:
            return ""
        return (
            f"the pod names scheduler {pod.scheduler_name!r}, not one of the trusted "
            f"schedulers ({', '.join(sorted(rule.names))})"
        )
    if pod.scheduler_name and pod.scheduler_name in rule.unsigned_from:
        return ""
    if rule.verifier is None:
        return "no grant signing key is loaded yet"
    signature = pod.annotations.get(GRANT_SIGNATURE_ANNOTATION)
    if not signature:
        return f"the grant has no {GRANT_SIGNATURE_ANNOTATION} (not written by the scheduler)"
    if not rule.verifier.verify(signature, claim):
        return (
            f"{GRANT_SIGNATURE_ANNOTATION} does not verify for this pod's uid, node "
            f"{claim.node}, {ASSIGNED_TIME_ANNOTATION}, device list and MIG reservations "
            "(forged, copied or altered grant)"
        )
    return ""
