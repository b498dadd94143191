"""What vgpu believes of what others write. Anyone who can edit a pod can write its
annotations, so a grant is signed by the scheduler (`signing`) and believed by one rule
(`grant_trust`); which pods' grants occupy cards follows a rule a tenant cannot use to take or
block cards (`occupancy`); and what was counted is kept where tenants cannot write: on the Node
(`occupancy_record`), in the device plugin's file on the host (`served_record`), and in the
kubelet's device checkpoint (`kubelet_holdings`). `scheduler_owned` names the annotations and
labels only vgpu writes.
"""

from vgpu.domain.trust.grant_trust import (
    GrantVerdict,
    NamedSchedulers,
    Signatures,
    claim_grants,
    judge_grant,
)
from vgpu.domain.trust.kubelet_holdings import DeviceAssignment, KubeletHolding, holdings_by_pod
from vgpu.domain.trust.occupancy import Basis, Occupancy, judge_occupancy
from vgpu.domain.trust.occupancy_record import (
    MAX_ENTRY_BYTES,
    MAX_RECORD_BYTES,
    OCCUPANCY_ANNOTATION,
    OccupancyEntry,
    OccupancyRecord,
    OccupancyRecordChange,
    OverflowName,
    decode_occupancy_record,
    updated_occupancy_record,
)
from vgpu.domain.trust.served_record import (
    ServedGrant,
    ServedRecordError,
    decode_served_record,
    encode_served_record,
)
from vgpu.domain.trust.signing import (
    GRANT_SIGNATURE_ANNOTATION,
    GrantClaim,
    KeyRing,
    SigningError,
    grant_claim,
    signed_mig_text,
)

__all__ = [
    "GRANT_SIGNATURE_ANNOTATION",
    "MAX_ENTRY_BYTES",
    "MAX_RECORD_BYTES",
    "OCCUPANCY_ANNOTATION",
    "Basis",
    "DeviceAssignment",
    "GrantClaim",
    "GrantVerdict",
    "KeyRing",
    "KubeletHolding",
    "NamedSchedulers",
    "Occupancy",
    "OccupancyEntry",
    "OccupancyRecord",
    "OccupancyRecordChange",
    "OverflowName",
    "ServedGrant",
    "ServedRecordError",
    "Signatures",
    "SigningError",
    "claim_grants",
    "decode_occupancy_record",
    "decode_served_record",
    "encode_served_record",
    "grant_claim",
    "holdings_by_pod",
    "judge_grant",
    "judge_occupancy",
    "signed_mig_text",
    "updated_occupancy_record",
]
