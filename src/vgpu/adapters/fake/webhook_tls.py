"""In-memory `WebhookTLSPort`: the Secret and the caBundle as plain attributes."""

from collections.abc import Mapping

from vgpu.ports.webhook_tls import StoredCerts


class FakeWebhookTLS:
    def __init__(self) -> None:
        self.stored: StoredCerts | None = None
        self.ca_bundle: bytes | None = None
        self.saves = 0

    def load(self) -> StoredCerts | None:
        return self.stored

    def save(self, data: Mapping[str, bytes], replaces: StoredCerts | None) -> bool:
        current = self.stored.version if self.stored else None
        if (replaces.version if replaces else None) != current:
            return False
        self.saves += 1
        self.stored = StoredCerts(dict(data), str(self.saves))
        return True

    def trust(self, ca_bundle: bytes) -> None:
        self.ca_bundle = ca_bundle
