"""Grants nobody but the scheduler can write: an HMAC-SHA256 over what a grant promises.

The scheduler signs each placement it writes on a pod; the device plugin and the ledger accept a
grant only when its signature verifies for *that* pod (uid) on *that* node with *that* grant
text. A tenant can copy annotations, but not a signature for another pod, node or amount.

Keys live in a key ring: several named keys, the greatest name signs, any of them verifies. To
rotate, add a key with a greater name; once grants signed with the old key are gone, drop it.
"""

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from vgpu.domain.errors import CodecError, DomainError
from vgpu.domain.mig.allocations import (
    MIG_ALLOCATIONS_ANNOTATION,
    decode_mig_allocations,
    encode_mig_allocations,
)
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, ASSIGNED_TIME_ANNOTATION, Vendor

GRANT_SIGNATURE_ANNOTATION = "vgpu.io/grant-signature"
"""The pod annotation holding the scheduler's signature of its grant: `<key name>:<HMAC>`
(`KeyRing.sign`)."""
MIN_KEY_BYTES = 32
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,63}")
_DOMAIN_TAG = "vgpu-grant-v1"


class SigningError(DomainError):
    """A key ring that cannot sign or verify: no keys, a short key, a bad key name."""


@dataclass(frozen=True, slots=True)
class GrantClaim:
    """What one signature vouches for: this pod, on this node, at this time, these cards."""

    pod_uid: str
    node: str
    assigned_time: str  # hami.io/vgpu-time
    allocated: str  # hami.io/vgpu-devices-allocated, byte for byte
    mig_reservations: str = ""  # hami.io/vgpu-mig-allocations without runtime fields

    def message(self) -> bytes:
        """The bytes the signature covers: the claim's fields as one JSON array."""
        # JSON keeps field boundaries unambiguous whatever characters the fields hold; a grant
        # without MIG devices signs the same four fields as before MIG existed
        fields = [_DOMAIN_TAG, self.pod_uid, self.node, self.assigned_time, self.allocated]
        if self.mig_reservations:
            fields.append(self.mig_reservations)
        return json.dumps(fields, separators=(",", ":")).encode()


def grant_claim(pod_uid: str, annotations: Mapping[str, str], vendor: Vendor) -> GrantClaim | None:
    """The claim a pod's grant annotations make, or None when they make none: the one place a
    claim is built, for signing (scheduler) and checking (scheduler and device plugin)."""
    allocated = annotations.get(vendor.allocated_annotation)
    node = annotations.get(ASSIGNED_NODE_ANNOTATION)
    if not allocated or not node:
        return None
    return GrantClaim(
        pod_uid,
        node,
        annotations.get(ASSIGNED_TIME_ANNOTATION, ""),
        allocated,
        signed_mig_text(annotations.get(MIG_ALLOCATIONS_ANNOTATION, "")),
    )


def signed_mig_text(text: str) -> str:
    """The part of `hami.io/vgpu-mig-allocations` a signature covers: the reservations as the
    scheduler wrote them. The device plugin later adds each instance's runtime identity, which
    must not break the signature; malformed text is covered as it is (and so never verifies)."""
    try:
        reservations = decode_mig_allocations(text)
    except CodecError:
        return text
    return encode_mig_allocations([replace(r, runtime=None) for r in reservations])


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Named HMAC keys. `sign` uses the greatest name; `verify` accepts any name in the ring."""

    keys: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, key in self.keys.items():
            if not _KEY_ID.fullmatch(name):
                raise SigningError(
                    f"grant key name {name!r} must be 1-63 letters, digits, '.', '_' or '-'"
                )
            if len(key) < MIN_KEY_BYTES:
                raise SigningError(
                    f"grant key {name!r} has {len(key)} bytes; at least {MIN_KEY_BYTES} are needed"
                )

    @property
    def active(self) -> str:
        """The name of the key that signs."""
        if not self.keys:
            raise SigningError("the grant key ring is empty: nothing can be signed")
        return max(self.keys)

    def sign(self, claim: GrantClaim) -> str:
        """`<key name>:<base64url HMAC-SHA256>` for the annotation `vgpu.io/grant-signature`."""
        name = self.active
        return f"{name}:{_mac(self.keys[name], claim)}"

    def verify(self, signature: str | None, claim: GrantClaim) -> bool:
        """Whether `signature` was made by a key of this ring for exactly `claim`."""
        if not signature:
            return False
        name, sep, mac = signature.partition(":")
        key = self.keys.get(name)
        if not sep or key is None:
            return False
        return hmac.compare_digest(mac, _mac(key, claim))


def _mac(key: bytes, claim: GrantClaim) -> str:
    digest = hmac.new(key, claim.message(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
