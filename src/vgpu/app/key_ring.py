"""A fresh grant-signing key ring: what the scheduler stores in its Secret when none is there,
and what each `--fake-cluster` process keeps in memory."""

import secrets
from datetime import UTC, datetime

from vgpu.domain.trust import KeyRing


def new_key_ring(now: datetime) -> KeyRing:
    """One random 32-byte key named by the UTC minute, e.g. `k20261126t0530`."""
    return KeyRing({now.astimezone(UTC).strftime("k%Y%m%dt%H%M"): secrets.token_bytes(32)})
