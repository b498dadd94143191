"""HAMi's extended ResourceQuota: GPU memory, cores and cards per namespace.

Limits come from `spec.hard` keys `limits.<memory resource>`, `limits.<cores resource>` and
`limits.<count resource>` (the last one HAMi documents but does not enforce). A pod is charged
per granted card (2 cards x 2000 MiB = 4000 MiB), with percentages resolved on the chosen card.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.domain.device import Usage
from vgpu.domain.errors import DomainError
from vgpu.domain.grant import DeviceGrant, PodGrants
from vgpu.domain.quantity import parse_quantity
from vgpu.domain.vendor import Vendor


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """Hard limits of one namespace; None means no limit on that dimension."""

    memory: int | None = None
    cores: int | None = None
    cards: int | None = None

    @property
    def is_unlimited(self) -> bool:
        """Whether no dimension is limited."""
        return self.memory is None and self.cores is None and self.cards is None


@dataclass(frozen=True, slots=True)
class Budget:
    """What a namespace may still take; `slices` counts physical cards."""

    memory: int | None = None
    cores: int | None = None
    cards: int | None = None
    blocked: bool = False  # a limit explicitly set to 0 blocks every GPU request

    def allows(self, charge: Usage) -> bool:
        """Whether the namespace may take `charge` (memory, cores, and cards as `slices`)."""
        if self.blocked:
            return charge.is_idle
        return (
            (self.memory is None or charge.memory <= self.memory)
            and (self.cores is None or charge.cores <= self.cores)
            and (self.cards is None or charge.slices <= self.cards)
        )

    def describe(self) -> str:
        """What is left, in words: `namespace quota left: memory 1000 MiB, cores 20`."""
        if self.blocked:
            return "the namespace's GPU quota is 0"
        parts = [
            f"{name} {left}{unit}"
            for name, left, unit in (
                ("memory", self.memory, " MiB"),
                ("cores", self.cores, ""),
                ("cards", self.cards, ""),
            )
            if left is not None
        ]
        return "namespace quota left: " + (", ".join(parts) or "unlimited")

    def shortfall(self, charge: Usage) -> str:
        """Which limit `charge` breaks, in words."""
        if self.blocked:
            return "the namespace's GPU quota is 0"
        parts = []
        if self.memory is not None and charge.memory > self.memory:
            parts.append(f"memory {charge.memory} MiB > {self.memory} MiB left")
        if self.cores is not None and charge.cores > self.cores:
            parts.append(f"cores {charge.cores} > {self.cores} left")
        if self.cards is not None and charge.slices > self.cards:
            parts.append(f"cards {charge.slices} > {self.cards} left")
        return ", ".join(parts)


UNLIMITED = Budget()


def limits_from_hard(
    hard: Mapping[str, Any], vendor: Vendor, memory_factor: int = 1
) -> QuotaLimits:
    """Read a ResourceQuota's `spec.hard`; a bad quantity raises DomainError naming the key."""

    def read(resource: str) -> int | None:
        key = f"limits.{resource}"
        if key not in hard:
            return None
        try:
            value = parse_quantity(hard[key])
        except ValueError as exc:
            raise DomainError(f"ResourceQuota {key}={hard[key]!r} {exc}") from exc
        if value < 0 or value != value.to_integral_value():
            raise DomainError(f"ResourceQuota {key}={hard[key]!r} must be a whole number >= 0")
        return int(value)

    memory = read(vendor.memory_resource)
    if memory is not None and memory_factor > 1:
        memory *= memory_factor
    return QuotaLimits(
        memory=memory, cores=read(vendor.cores_resource), cards=read(vendor.count_resource)
    )


def pod_charge(grants: PodGrants, init_count: int) -> Usage:
    """What a pod counts against quota: the larger of the app containers' sum and any single
    init container (init containers run alone, before the app containers)."""
    app = _charge(g for container in grants[init_count:] for g in container)
    for container in grants[:init_count]:
        app = app.union(_charge(container))
    return app


def _charge(grants: Iterable[DeviceGrant]) -> Usage:
    return _total(grant.usage for grant in grants)


def _total(amounts: Iterable[Usage]) -> Usage:
    total = Usage()
    for amount in amounts:
        total = total + amount
    return total


class QuotaBook:
    """Limits and usage per namespace, fed by quota and pod events."""

    def __init__(self) -> None:
        self._limits: dict[str, QuotaLimits] = {}
        self._charges: dict[str, tuple[str, Usage]] = {}  # pod key -> (namespace, charge)
        self._used: dict[str, Usage] = {}

    def set_limits(self, namespace: str, limits: QuotaLimits) -> None:
        """Replace a namespace's limits (from its ResourceQuota); unlimited ones are dropped."""
        if limits.is_unlimited:
            self._limits.pop(namespace, None)
        else:
            self._limits[namespace] = limits

    def limits(self, namespace: str) -> QuotaLimits:
        """The namespace's limits; none for a namespace without a GPU quota."""
        return self._limits.get(namespace, QuotaLimits())

    def used(self, namespace: str) -> Usage:
        """What the namespace's charged pods take together (`slices` counts cards)."""
        return self._used.get(namespace, Usage())

    def charge(
        self,
        pod_key: str,
        namespace: str,
        grants: PodGrants,
        init_count: int,
        *,
        hold: Mapping[str, Usage] | None = None,
    ) -> None:
        """Count a pod's grants; charging the same pod again replaces its old charge. `hold`,
        the pod's smaller hold once its init containers have finished
        (`vgpu.domain.initrelease.hold_after_init`), is charged instead: what the pod no longer
        holds on its cards no longer counts against its namespace either."""
        self.refund(pod_key)
        amount = pod_charge(grants, init_count) if hold is None else _total(hold.values())
        self._charges[pod_key] = (namespace, amount)
        self._used[namespace] = self.used(namespace) + amount

    def refund(self, pod_key: str) -> None:
        """Stop counting a pod; harmless for a pod that was never charged."""
        entry = self._charges.pop(pod_key, None)
        if entry is not None:
            namespace, amount = entry
            self._used[namespace] = self.used(namespace) - amount

    def budget(self, namespace: str) -> Budget:
        """What the namespace may still take: its limits less what it uses, never below 0."""
        limits = self._limits.get(namespace)
        if limits is None:
            return UNLIMITED
        used = self.used(namespace)

        def left(limit: int | None, taken: int) -> int | None:
            return None if limit is None else max(limit - taken, 0)

        return Budget(
            memory=left(limits.memory, used.memory),
            cores=left(limits.cores, used.cores),
            cards=left(limits.cards, used.slices),
            blocked=0 in (limits.memory, limits.cores, limits.cards),
        )
