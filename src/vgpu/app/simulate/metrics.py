"""What a run measures: utilisation over time, fragmentation, placement and waiting figures."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.domain import Device, Ledger


@dataclass(frozen=True, slots=True)
class TypicalRequest:
    """The median per-card request of the workload: what a free card should be able to take."""

    memory: int
    cores: int


@dataclass(slots=True)
class Series:
    """Cluster-wide fractions (0..1) sampled over simulated time, plus per-node memory use."""

    times: list[float] = field(default_factory=list)
    memory: list[float] = field(default_factory=list)
    cores: list[float] = field(default_factory=list)
    slices: list[float] = field(default_factory=list)
    fragmentation: list[float] = field(default_factory=list)  # stranded / all memory
    stranded_of_free: list[float] = field(default_factory=list)  # stranded / free memory
    pending: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    node_names: list[str] = field(default_factory=list)
    node_memory: list[list[float]] = field(default_factory=list)  # [sample][node]


class Sampler:
    """Reads the ledger at sample times and keeps the series."""

    def __init__(
        self,
        devices: Mapping[str, Sequence[Device]],
        typical: TypicalRequest,
        slices_bound: bool = True,
    ) -> None:
        """`slices_bound`: a card with all its slices taken strands its free memory (under
        DRA a device has no split count, and only its capacities bound it)."""
        self._slices_bound = slices_bound
        self._devices = {
            node: tuple(d for d in cards if d.healthy) for node, cards in devices.items()
        }
        self._typical = typical
        self.series = Series(node_names=list(self._devices))
        self._memory = sum(d.memory for cards in self._devices.values() for d in cards)
        self._cores = sum(d.cores for cards in self._devices.values() for d in cards)
        self._slices = sum(d.count for cards in self._devices.values() for d in cards)

    def sample(self, time: float, ledger: Ledger, pending: int, running: int) -> None:
        used_memory = used_cores = used_slices = free_memory = stranded = 0
        per_node: list[float] = []
        want_memory, want_cores = self._typical.memory, self._typical.cores
        for node, cards in self._devices.items():
            node_used = node_capacity = 0
            usages = ledger.view(node).usage  # the ledger's own mapping, read before it changes
            for card in cards:
                usage = usages.get(card.uuid)
                if usage is None:  # an idle card: all of it free, stranded only if too small
                    node_capacity += card.memory
                    free_memory += card.memory
                    small = card.memory < want_memory or card.cores < want_cores
                    if small or not self._takes(card, 0):
                        stranded += card.memory
                    continue
                used_memory += usage.memory
                used_cores += usage.cores
                used_slices += usage.slices
                node_used += usage.memory
                node_capacity += card.memory
                free = max(card.memory - usage.memory, 0)
                free_memory += free
                if free and not (
                    self._takes(card, usage.slices)
                    and free >= want_memory
                    and card.cores - usage.cores >= want_cores
                ):
                    stranded += free
            per_node.append(_fraction(node_used, node_capacity))
        series = self.series
        series.times.append(time)
        series.memory.append(_fraction(used_memory, self._memory))
        series.cores.append(_fraction(used_cores, self._cores))
        series.slices.append(_fraction(used_slices, self._slices))
        series.fragmentation.append(_fraction(stranded, self._memory))
        series.stranded_of_free.append(_fraction(stranded, free_memory))
        series.pending.append(pending)
        series.running.append(running)
        series.node_memory.append(per_node)

    def _takes(self, card: Device, slices: int) -> bool:
        """Whether the card may take one more container by its split count."""
        return slices < card.count or not self._slices_bound


def _fraction(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True, slots=True)
class Reasons:
    """Pods counted by reason (commonest first), with one full message per reason."""

    counts: tuple[tuple[str, int], ...] = ()
    examples: tuple[tuple[str, str], ...] = ()

    def top(self, n: int = 3) -> str:
        return ", ".join(f"{count} {reason}" for reason, count in self.counts[:n]) or "-"

    def as_json(self) -> list[dict[str, Any]]:
        example = dict(self.examples)
        return [
            {"reason": reason, "pods": count, "example": example.get(reason, "")}
            for reason, count in self.counts
        ]


@dataclass(frozen=True, slots=True)
class Preemptions:
    """What preemption did in a run: pods placed by evicting others, and evictions."""

    placed_by_preempting: int
    evicted: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run of the workload under one node/GPU policy pair."""

    policy: str
    submitted: int
    denied: int
    placed: int
    placed_at_once: int
    pending_end: int
    running_end: int
    finished: int
    wait_mean: float  # seconds, over pods that had to wait
    wait_p95: float  # seconds, over every placed pod
    pending_reasons: Reasons
    denied_reasons: Reasons
    memory_mean: float
    memory_p95: float
    cores_mean: float
    cores_p95: float
    slices_mean: float
    slices_p95: float
    fragmentation_mean: float
    fragmentation_p95: float
    stranded_of_free_mean: float
    attempts: int
    decide_calls: int
    schedule_seconds: float
    wall_seconds: float
    typical: TypicalRequest
    series: Series
    preemptions: Preemptions | None = None  # None: preemption was off

    @property
    def decisions_per_second(self) -> float:
        return self.attempts / self.schedule_seconds if self.schedule_seconds > 0 else 0.0

    def outcome(self) -> dict[str, Any]:
        """Everything that depends only on the scenario and seed (no timings)."""
        data = self.as_json(series=True)
        data.pop("timing")
        return data

    def as_json(self, series: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "policy": self.policy,
            # a DRA run (`dra`) has no vgpu policies: kube-scheduler allocates the claims
            "mode": "device-plugin" if "/" in self.policy else "dra",
            "node_policy": self.policy.split("/")[0] if "/" in self.policy else None,
            "gpu_policy": self.policy.split("/")[1] if "/" in self.policy else None,
            "pods": {
                "submitted": self.submitted,
                "denied_at_admission": self.denied,
                "placed": self.placed,
                "placed_at_once": self.placed_at_once,
                "placed_after_waiting": self.placed - self.placed_at_once,
                "pending_at_end": self.pending_end,
                "running_at_end": self.running_end,
                "finished": self.finished,
            },
            **self._preemption_json(),
            "wait_seconds": {"mean_of_waiting": self.wait_mean, "p95": self.wait_p95},
            "pending_reasons": self.pending_reasons.as_json(),
            "denied_reasons": self.denied_reasons.as_json(),
            "utilisation": {
                "memory": {"mean": self.memory_mean, "p95": self.memory_p95},
                "cores": {"mean": self.cores_mean, "p95": self.cores_p95},
                "slices": {"mean": self.slices_mean, "p95": self.slices_p95},
            },
            "fragmentation": {
                "mean": self.fragmentation_mean,
                "p95": self.fragmentation_p95,
                "share_of_free_memory_mean": self.stranded_of_free_mean,
                "typical_request": {
                    "memory_mib": self.typical.memory,
                    "cores": self.typical.cores,
                },
            },
            "scheduling": {"attempts": self.attempts, "decide_calls": self.decide_calls},
            "timing": {
                "schedule_seconds": self.schedule_seconds,
                "wall_seconds": self.wall_seconds,
                "decisions_per_second": self.decisions_per_second,
            },
        }
        if series:
            s = self.series
            data["series"] = {
                "times": s.times,
                "memory": s.memory,
                "cores": s.cores,
                "slices": s.slices,
                "fragmentation": s.fragmentation,
                "stranded_of_free": s.stranded_of_free,
                "pending": s.pending,
                "running": s.running,
            }
        return data

    def _preemption_json(self) -> dict[str, Any]:
        if self.preemptions is None:
            return {}
        return {
            "preemption": {
                "placed_by_preempting": self.preemptions.placed_by_preempting,
                "evicted": self.preemptions.evicted,
            }
        }
