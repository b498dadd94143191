"""Which pods' grants occupy cards: the counting rule the scheduler's ledger follows.

Occupancy is never under-counted, and a tenant must not make cards look full, so a pod's grant
counts when the pod is not finished and

- its grant is believed (`vgpu.domain.trust.grant_trust.judge_grant`): signed, or written by a
  trusted scheduler; or
- it is bound and *holds GPUs*: one of its containers asks for the vendor's card count
  resource (`nvidia.com/gpu`), and its grant reads and names the node it is bound to, signed or
  not. The kubelet starts such a pod only once the device plugin served it, so its cards are in
  use (HAMi's running pods, pods placed before signing was on); a pod whose Allocate was
  refused ends up `Failed`, and a finished pod counts for nothing.

Forged annotations on a pod that asks for no card count for nothing, bound or not.

This rule judges a pod's annotations as they are now. Once a bound pod's grant has been counted,
the scheduler keeps counting that grant until the pod ends, whatever its annotations say later
(its occupancy record, `vgpu.domain.trust.occupancy_record`).

>>> from vgpu.domain.trust import Signatures
>>> from vgpu.domain.pod import Container, Pod
>>> from vgpu.domain.vendor import NVIDIA
>>> hami_pod = Pod("default", "p", uid="u1", node_name="n1", phase="Running",
...     scheduler_name="hami-scheduler",
...     containers=(Container("main", limits={"nvidia.com/gpu": 1}),),
...     annotations={"hami.io/vgpu-node": "n1",
...                  "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,1000,10:;"})
>>> judge_occupancy(hami_pod, NVIDIA, Signatures(None)).basis
<Basis.HOLDS_GPUS: 'holds GPUs'>
"""

from dataclasses import dataclass
from enum import Enum

from vgpu.domain.grant import PodGrants
from vgpu.domain.pod import Pod
from vgpu.domain.quantity import parse_quantity
from vgpu.domain.request import request_values
from vgpu.domain.trust.grant_trust import GrantVerdict, NamedSchedulers, Signatures, judge_grant
from vgpu.domain.trust.signing import GrantClaim
from vgpu.domain.vendor import Vendor


class Basis(Enum):
    """Why a grant counts."""

    SIGNED = "signed"  # believed: its signature verifies
    NAMED = "trusted scheduler"  # believed unsigned: signing off, or HAMi's during a takeover
    HOLDS_GPUS = "holds GPUs"  # bound, asks for cards, grant names its node: counted unsigned


@dataclass(frozen=True, slots=True)
class Occupancy:
    """A pod's grant as the counting rule sees it: the trust verdict (what it claims, its decoded
    grants, why it is not believed), why it counts (None: it does not) and, when it does not,
    why not."""

    verdict: GrantVerdict
    basis: Basis | None = None
    why_not: str = ""

    @property
    def claim(self) -> GrantClaim | None:
        return self.verdict.claim

    @property
    def grants(self) -> PodGrants | None:
        return self.verdict.grants

    @property
    def counts(self) -> bool:
        return self.basis is not None


def holds_gpus(pod: Pod, vendor: Vendor) -> bool:
    """Whether one of the pod's containers asks for at least one of the vendor's cards
    (`vendor.count_resource`, limits over requests); an unreadable amount asks for none."""
    for container in pod.containers:
        raw = request_values(container).get(vendor.count_resource)
        if raw is None:
            continue
        try:
            if parse_quantity(raw) > 0:
                return True
        except ValueError:
            continue
    return False


def judge_occupancy(pod: Pod, vendor: Vendor, rule: Signatures | NamedSchedulers) -> Occupancy:
    """Whether `pod`'s grant, as its annotations say now, occupies cards (see the module)."""
    verdict = judge_grant(pod, vendor, rule)
    if pod.is_finished:
        return Occupancy(verdict, why_not=f"the pod is {pod.phase}")
    if verdict.claim is None or verdict.grants is None:
        return Occupancy(verdict, why_not=verdict.problem)
    if verdict.trusted:
        unsigned = isinstance(rule, NamedSchedulers) or pod.scheduler_name in rule.unsigned_from
        return Occupancy(verdict, Basis.NAMED if unsigned else Basis.SIGNED)
    if not pod.node_name or pod.node_name != verdict.claim.node:
        return Occupancy(verdict, why_not=verdict.problem)
    if not holds_gpus(pod, vendor):
        return Occupancy(
            verdict,
            why_not=f"{verdict.problem}, and it asks for no {vendor.count_resource}",
        )
    return Occupancy(verdict, Basis.HOLDS_GPUS)
