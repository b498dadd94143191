"""Pod annotations and labels that only vgpu's scheduler and device plugin may write.

They are how a pod comes to hold a card: a tenant who could set them would take a card without
asking the scheduler. So the webhook removes them from every pod it admits, and the
ValidatingAdmissionPolicy in deploy/scheduler/admission-policy.yaml refuses them from anyone
but those two service accounts, also for pods the webhook never sees.
"""

from vgpu.domain.trust.signing import GRANT_SIGNATURE_ANNOTATION
from vgpu.domain.vendor import ASSIGNED_NODE_LABEL

HAMI_PREFIX = "hami.io/"
# hami.io/vgpu-node, -time, -devices-to-allocate, -devices-allocated, -mig-allocations...
# and hami.io/bind-phase, bind-time
OWNED_ANNOTATION_PREFIXES = ("hami.io/vgpu-", "hami.io/bind-")
OWNED_ANNOTATIONS = frozenset({GRANT_SIGNATURE_ANNOTATION})
# every vendor's grant lists: hami.io/<vendor>-devices-to-allocate, -devices-allocated
VENDOR_DEVICES_INFIX = "-devices-"
OWNED_LABELS = frozenset({ASSIGNED_NODE_LABEL})


def is_scheduler_owned_annotation(key: str) -> bool:
    if key.startswith(OWNED_ANNOTATION_PREFIXES) or key in OWNED_ANNOTATIONS:
        return True
    return key.startswith(HAMI_PREFIX) and VENDOR_DEVICES_INFIX in key[len(HAMI_PREFIX) :]


def is_scheduler_owned_label(key: str) -> bool:
    return key in OWNED_LABELS
