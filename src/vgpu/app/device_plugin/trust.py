"""Whether a pod's grant came from the scheduler, so that the plugin may serve it: the domain's
rule (`vgpu.domain.trust.grant_trust`) as the plugin of one node applies it.

With signing on, the signature must verify with the key ring the plugin reads from the
scheduler's Secret; with signing off (HAMi's scheduler, which does not sign), the pod must name
one of the trusted schedulers. Either way the pod must be bound to this node and its grant must
name it, and the grant must read (a card twice in one container only as MIG devices placed
apart by `hami.io/vgpu-mig-allocations`).
"""

from vgpu.domain.codec import decode_pod_grants
from vgpu.domain.grant import PodGrants
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION, decode_mig_allocations
from vgpu.domain.pod import Pod
from vgpu.domain.trust import GrantVerdict, NamedSchedulers, Signatures, judge_grant
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, Vendor


class NodeGrantTrust:
    """Judges grants on this node. A `Signatures` verifier that was never able to read its key
    store raises KeyRingUnavailable: then nothing can be decided either way."""

    def __init__(self, rule: Signatures | NamedSchedulers, node: str, vendor: Vendor) -> None:
        self._rule = rule
        self._node = node
        self._vendor = vendor

    def judge(self, pod: Pod) -> GrantVerdict:
        verdict = judge_grant(pod, self._vendor, self._rule, self._node)
        if verdict.claim is None:
            missing = (
                self._vendor.allocated_annotation
                if ASSIGNED_NODE_ANNOTATION in pod.annotations
                else ASSIGNED_NODE_ANNOTATION
            )
            return GrantVerdict(None, None, f"the pod has no {missing}")
        return verdict

    def problem(self, pod: Pod) -> str | None:
        """Why the pod's grant is not to be believed on this node; None when it is."""
        return self.judge(pod).problem or None

    def signed(self, pod: Pod) -> bool:
        """Whether the pod's grant is believed for its signature, not only for the scheduler
        it names (HAMi's, while taking over, or any with signing off)."""
        if not isinstance(self._rule, Signatures) or self._rule.verifier is None:
            return False
        rule = Signatures(self._rule.verifier)
        return judge_grant(pod, self._vendor, rule, self._node).trusted

    def describe(self) -> str:
        """Which grants this plugin serves, for the log at start."""
        if isinstance(self._rule, NamedSchedulers):
            names = ", ".join(sorted(self._rule.names))
            return f"signing off: unsigned grants on pods that name one of {names}"
        if self._rule.unsigned_from:
            names = ", ".join(sorted(self._rule.unsigned_from))
            return (
                "takeover from HAMi (takeover.from_hami): grants signed by vgpu's scheduler, "
                f"and unsigned grants on pods that name {names}"
            )
        return "grants signed by vgpu's scheduler only"


def pod_grants(pod: Pod, key: str) -> PodGrants:
    """The grants in the pod's annotation `key` (`allocated` or `to-allocate`), where a card
    may repeat in a container only as MIG devices its reservations place apart; CodecError
    when the grants or the reservations do not read."""
    reservations = decode_mig_allocations(pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, ""))
    return decode_pod_grants(pod.annotations.get(key, ""), key, reservations)


def container_label(pod: Pod, index: int) -> str:
    """The name of the container a grant segment is for, or its index when there is none."""
    return repr(pod.containers[index].name) if index < len(pod.containers) else f"#{index}"
