"""Where the webhook's CA and serving certificate are kept, and where the CA is trusted.

In production: a Secret in the scheduler's namespace and the `caBundle` of its
MutatingWebhookConfiguration.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class StoredCerts:
    """The Secret's PEM entries (`ca.crt`, `ca.key`, `tls.crt`, `tls.key`) and its version."""

    data: Mapping[str, bytes]
    version: str


class WebhookTLSPort(Protocol):
    def load(self) -> StoredCerts | None:
        """The stored certificates, or None when none are stored; ClusterError if unreadable."""
        ...

    def save(self, data: Mapping[str, bytes], replaces: StoredCerts | None) -> bool:
        """Store `data` in place of `replaces` (None: create). False when another writer got
        there first (the object exists, or changed since `replaces` was read)."""
        ...

    def trust(self, ca_bundle: bytes) -> None:
        """Set `ca_bundle` (PEM) as the caBundle of every webhook in the configuration."""
        ...
