"""MIG: the instance profiles a card offers and where they sit (`profiles`, `geometry`), the
pods' `hami.io/vgpu-mig-allocations` (`allocations`), the allowlist of profiles a model
publishes (`allowlist`) and which instances the device plugin keeps, makes and destroys
(`lifecycle`).

Two modules join MIG to the rest of the domain and are imported by their path:
`vgpu.domain.mig.choice` (which instance a request gets on a card, part of fitting a pod) and
`vgpu.domain.mig.grants` (a pod's grants to and from its reservations). They build on cards,
requests and the grant codec, which themselves use this package's values, so this face cannot
import them without importing itself.
"""

from vgpu.domain.mig.allocations import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigReservation,
    MigRuntime,
    decode_mig_allocations,
    encode_mig_allocations,
    with_runtimes,
)
from vgpu.domain.mig.allowlist import (
    AllowlistError,
    MigAllowlistEntry,
    allowlisted_profiles,
    check_allowlist,
)
from vgpu.domain.mig.geometry import (
    can_place_mig_profiles,
    legacy_mig_template,
    mig_placement,
    placement_order,
)
from vgpu.domain.mig.lifecycle import (
    Managed,
    MigKey,
    MigReservationError,
    PodReservation,
    container_reservations,
    describe_instance,
    plan_placement,
    start_plan,
    to_release,
)
from vgpu.domain.mig.profiles import MigCapability, MigInstance, MigPlacement, MigProfile, MigSlot

__all__ = [
    "MIG_ALLOCATIONS_ANNOTATION",
    "AllowlistError",
    "Managed",
    "MigAllowlistEntry",
    "MigCapability",
    "MigInstance",
    "MigKey",
    "MigPlacement",
    "MigProfile",
    "MigReservation",
    "MigReservationError",
    "MigRuntime",
    "MigSlot",
    "PodReservation",
    "allowlisted_profiles",
    "can_place_mig_profiles",
    "check_allowlist",
    "container_reservations",
    "decode_mig_allocations",
    "describe_instance",
    "encode_mig_allocations",
    "legacy_mig_template",
    "mig_placement",
    "placement_order",
    "plan_placement",
    "start_plan",
    "to_release",
    "with_runtimes",
]
