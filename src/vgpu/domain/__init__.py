"""vgpu's scheduling rules, pure Python, HAMi-compatible. Embed them in any scheduler.

Typical use (see README "Embedding the domain")::

    ledger = Ledger()
    ledger.set_node("node-a", decode_node_devices(node_annotations[NVIDIA.register_annotation]))
    plan = plan_pod(pod_from_manifest(pod_json), SchedulingConfig())
    decision = decide(plan, [ledger.view("node-a")])
    if isinstance(decision, Placement):
        ledger.grant(plan.key, decision.node, decision.grants, plan.init_count)
        annotation = encode_pod_grants(decision.grants)
"""

from vgpu.domain.admission import AdmissionConfig, AdmissionDecision, admit
from vgpu.domain.allocation import (
    AllocationConfig,
    AllocationInput,
    ContainerAllocation,
    Mount,
    allocate_container,
)
from vgpu.domain.codec import (
    decode_node_devices,
    decode_pod_grants,
    encode_node_devices,
    encode_pod_grants,
)
from vgpu.domain.decision import (
    Decision,
    NodeScore,
    NoPlacement,
    Placement,
    SchedulingConfig,
    decide,
    plan_pod,
)
from vgpu.domain.device import Device, Usage
from vgpu.domain.errors import (
    CodecError,
    DomainError,
    LedgerError,
    PolicyError,
    RequestError,
)
from vgpu.domain.fit import NodeView, PodPlan, card_order, fit_pod, node_score
from vgpu.domain.grant import DeviceGrant, PodGrants
from vgpu.domain.ledger import Ledger
from vgpu.domain.mig import MigPlacement, MigProfile, MigSlot
from vgpu.domain.mig_fit import mig_choice
from vgpu.domain.node import ClusterNode, node_from_manifest
from vgpu.domain.pod import Container, Pod, pod_from_manifest
from vgpu.domain.policy import PodPolicies, Policy, card_score, pod_policies
from vgpu.domain.quota import Budget, QuotaBook, QuotaLimits, limits_from_hard
from vgpu.domain.reasons import NodeRejection, Reason
from vgpu.domain.request import ContainerRequest, RequestDefaults, parse_request
from vgpu.domain.scoring_weights import DEFAULT_WEIGHTS, ScoringWeights, parse_scoring_weights
from vgpu.domain.signing import GRANT_SIGNATURE_ANNOTATION, GrantClaim, KeyRing, SigningError
from vgpu.domain.topology import SCORE_ANNOTATION, choose_cards, decode_pair_scores
from vgpu.domain.vendor import NVIDIA, Vendor

__all__ = [
    "DEFAULT_WEIGHTS",
    "GRANT_SIGNATURE_ANNOTATION",
    "NVIDIA",
    "SCORE_ANNOTATION",
    "AdmissionConfig",
    "AdmissionDecision",
    "AllocationConfig",
    "AllocationInput",
    "Budget",
    "ClusterNode",
    "CodecError",
    "Container",
    "ContainerAllocation",
    "ContainerRequest",
    "Decision",
    "Device",
    "DeviceGrant",
    "DomainError",
    "GrantClaim",
    "KeyRing",
    "Ledger",
    "LedgerError",
    "MigPlacement",
    "MigProfile",
    "MigSlot",
    "Mount",
    "NoPlacement",
    "NodeRejection",
    "NodeScore",
    "NodeView",
    "Placement",
    "Pod",
    "PodGrants",
    "PodPlan",
    "PodPolicies",
    "Policy",
    "PolicyError",
    "QuotaBook",
    "QuotaLimits",
    "Reason",
    "RequestDefaults",
    "RequestError",
    "SchedulingConfig",
    "ScoringWeights",
    "SigningError",
    "Usage",
    "Vendor",
    "admit",
    "allocate_container",
    "card_order",
    "card_score",
    "choose_cards",
    "decide",
    "decode_node_devices",
    "decode_pair_scores",
    "decode_pod_grants",
    "encode_node_devices",
    "encode_pod_grants",
    "fit_pod",
    "limits_from_hard",
    "mig_choice",
    "node_from_manifest",
    "node_score",
    "parse_request",
    "parse_scoring_weights",
    "plan_pod",
    "pod_from_manifest",
    "pod_policies",
]
