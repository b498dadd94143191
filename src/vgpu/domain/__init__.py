"""vgpu's scheduling rules, pure Python, HAMi-compatible. Embed them in any scheduler.

Typical use (see README "Embedding the domain")::

    ledger = Ledger()
    ledger.set_node("node-a", decode_node_devices(node_annotations[NVIDIA.register_annotation]))
    plan = plan_pod(pod_from_manifest(pod_json), SchedulingConfig())
    decision = decide(plan, [ledger.view("node-a")])
    if isinstance(decision, Placement):
        ledger.grant(plan.key, decision.node, decision.grants, plan.init_count)
        annotation = encode_pod_grants(decision.grants)

Kubernetes DRA (`resource.k8s.io/v1`) is `vgpu.domain.dra`: its values, JSON, and
kube-scheduler's allocation with consumable capacity. The names an embedder starts from are
here too (`ResourceClaim`, `ResourceSlice`, `DeviceClass`, `Allocator`, `AllocatedDevices`,
...); a DRA device is `vgpu.domain.dra.Device` (`Device` here is a GPU as HAMi registers it).

HAMi's own steps can be asked one by one too (card order for a policy string, node-lock rules,
MIG geometry, topology helpers, its encoders and reason tokens): the README's table maps each
HAMi function to its name here.
"""

from vgpu.domain import dra
from vgpu.domain.admission import AdmissionConfig, AdmissionDecision, admit
from vgpu.domain.allocation import (
    AllocationConfig,
    AllocationInput,
    ContainerAllocation,
    Mount,
    allocate_container,
)
from vgpu.domain.codec import (
    decode_mig_profiles,
    decode_node_devices,
    decode_pod_grants,
    encode_mig_profiles,
    encode_node_devices,
    encode_node_devices_csv,
    encode_pod_grants,
    encode_vendor_grants,
)
from vgpu.domain.decision import (
    Decision,
    NodeScore,
    NoPlacement,
    Placement,
    SchedulingConfig,
    decide,
    extender_scores,
    plan_pod,
)
from vgpu.domain.device import Device, Usage
from vgpu.domain.dra import (
    AllocatedDevices,
    Allocation,
    AllocationOutcome,
    Allocator,
    CannotAllocate,
    DeviceClass,
    DeviceId,
    DeviceVerdict,
    GpuCard,
    ResourceClaim,
    ResourceSlice,
    SelectorError,
    gpu_device,
    node_slice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
    resource_claim_json,
    resource_slice_json,
)
from vgpu.domain.errors import (
    CodecError,
    DomainError,
    DraError,
    LedgerError,
    PolicyError,
    RequestError,
)
from vgpu.domain.fit import NodeView, PodPlan, card_order, fit_pod, is_mig_request, node_score
from vgpu.domain.grant import DeviceGrant, PodGrants, pod_footprint
from vgpu.domain.handshake import HamiVersion, HandshakeVerdict, NodeMemory
from vgpu.domain.initrelease import InitProgress, pod_hold
from vgpu.domain.ledger.book import Ledger
from vgpu.domain.mig.choice import mig_choice
from vgpu.domain.mig.geometry import (
    can_place_mig_profiles,
    legacy_mig_template,
    mig_placement,
    placement_order,
)
from vgpu.domain.mig.profiles import MigPlacement, MigProfile, MigSlot
from vgpu.domain.node import ClusterNode, node_from_manifest
from vgpu.domain.node_health import NodeHealthBook
from vgpu.domain.nodelock import (
    NodeLock,
    lock_owner,
    lock_releasable,
    locks_node,
    node_lock_expiry,
    node_lock_value,
    parse_go_duration,
    parse_node_lock,
)
from vgpu.domain.pod import Container, Pod, pod_from_manifest
from vgpu.domain.policy import PodPolicies, Policy, card_score, pod_policies
from vgpu.domain.policy_chain import (
    ScoredCard,
    order_scored_cards,
    policy_contains,
    sort_keys,
    sorts_before,
)
from vgpu.domain.quota import Budget, QuotaBook, QuotaLimits, limits_from_hard
from vgpu.domain.reasons import CardRejection, NodeRejection, Reason, gen_reason, parse_reason
from vgpu.domain.request import ContainerRequest, RequestDefaults, parse_request
from vgpu.domain.scoring_weights import DEFAULT_WEIGHTS, ScoringWeights, parse_scoring_weights
from vgpu.domain.topology import (
    LINK_NAME_POINTS,
    SCORE_ANNOTATION,
    GpuLink,
    PcieLink,
    Topology,
    best_combination,
    choose_cards,
    decode_pair_scores,
    encode_pair_scores,
    group_score,
    least_connected_card,
    link_name_score,
    pair_scores,
)
from vgpu.domain.trust.signing import GRANT_SIGNATURE_ANNOTATION, GrantClaim, KeyRing, SigningError
from vgpu.domain.vendor import NVIDIA, Vendor

__all__ = [
    "DEFAULT_WEIGHTS",
    "GRANT_SIGNATURE_ANNOTATION",
    "LINK_NAME_POINTS",
    "NVIDIA",
    "SCORE_ANNOTATION",
    "AdmissionConfig",
    "AdmissionDecision",
    "AllocatedDevices",
    "Allocation",
    "AllocationConfig",
    "AllocationInput",
    "AllocationOutcome",
    "Allocator",
    "Budget",
    "CannotAllocate",
    "CardRejection",
    "ClusterNode",
    "CodecError",
    "Container",
    "ContainerAllocation",
    "ContainerRequest",
    "Decision",
    "Device",
    "DeviceClass",
    "DeviceGrant",
    "DeviceId",
    "DeviceVerdict",
    "DomainError",
    "DraError",
    "GpuCard",
    "GpuLink",
    "GrantClaim",
    "HamiVersion",
    "HandshakeVerdict",
    "InitProgress",
    "KeyRing",
    "Ledger",
    "LedgerError",
    "MigPlacement",
    "MigProfile",
    "MigSlot",
    "Mount",
    "NoPlacement",
    "NodeHealthBook",
    "NodeLock",
    "NodeMemory",
    "NodeRejection",
    "NodeScore",
    "NodeView",
    "PcieLink",
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
    "ResourceClaim",
    "ResourceSlice",
    "SchedulingConfig",
    "ScoredCard",
    "ScoringWeights",
    "SelectorError",
    "SigningError",
    "Topology",
    "Usage",
    "Vendor",
    "admit",
    "allocate_container",
    "best_combination",
    "can_place_mig_profiles",
    "card_order",
    "card_score",
    "choose_cards",
    "decide",
    "decode_mig_profiles",
    "decode_node_devices",
    "decode_pair_scores",
    "decode_pod_grants",
    "dra",
    "encode_mig_profiles",
    "encode_node_devices",
    "encode_node_devices_csv",
    "encode_pair_scores",
    "encode_pod_grants",
    "encode_vendor_grants",
    "extender_scores",
    "fit_pod",
    "gen_reason",
    "gpu_device",
    "group_score",
    "is_mig_request",
    "least_connected_card",
    "legacy_mig_template",
    "limits_from_hard",
    "link_name_score",
    "lock_owner",
    "lock_releasable",
    "locks_node",
    "mig_choice",
    "mig_placement",
    "node_from_manifest",
    "node_lock_expiry",
    "node_lock_value",
    "node_score",
    "node_slice",
    "order_scored_cards",
    "pair_scores",
    "parse_device_class",
    "parse_go_duration",
    "parse_node_lock",
    "parse_reason",
    "parse_request",
    "parse_resource_claim",
    "parse_resource_slice",
    "parse_scoring_weights",
    "placement_order",
    "plan_pod",
    "pod_footprint",
    "pod_from_manifest",
    "pod_hold",
    "pod_policies",
    "policy_contains",
    "resource_claim_json",
    "resource_slice_json",
    "sort_keys",
    "sorts_before",
]
