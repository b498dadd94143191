"""Why a card or a node was rejected: HAMi's reason codes plus a sentence for people."""

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from vgpu.domain.hostile_text import INT64, whole_number


class Reason(StrEnum):
    """HAMi's reason tokens (pkg/device/common), so tooling that greps for them keeps working."""

    TYPE_MISMATCH = "CardTypeMismatch"
    UUID_MISMATCH = "CardUuidMismatch"
    SLICES_EXHAUSTED = "CardTimeSlicingExhausted"
    CORES_EXHAUSTED = "CardComputeUnitsExhausted"
    INSUFFICIENT_MEMORY = "CardInsufficientMemory"
    INSUFFICIENT_CORES = "CardInsufficientCore"
    UNHEALTHY = "CardNotHealth"
    CORDONED = "CardCordoned"
    NUMA = "NumaNotFit"
    EXCLUSIVE = "ExclusiveDeviceAllocateConflict"
    MODE = "ModeNotFit"
    MIG_TOPOLOGY = "CardMigTopologyInfeasible"  # no MIG profile with a free placement fits
    QUOTA = "ResourceQuotaNotFit"
    NOT_ENOUGH_CARDS = "NodeInsufficientDevice"
    TOO_FEW_LEFT = "AllocatedCardsInsufficientRequest"
    NODE_UNREGISTERED = "NodeUnregistered"
    POLICY = "InvalidPolicy"
    UNRECORDED = "NodeOccupancyUnrecorded"  # vgpu's own: see the scheduler's occupancy record


_PHRASES = {
    Reason.TYPE_MISMATCH: "type mismatch",
    Reason.UUID_MISMATCH: "uuid excluded",
    Reason.SLICES_EXHAUSTED: "no slice left",
    Reason.CORES_EXHAUSTED: "all cores in use",
    Reason.INSUFFICIENT_MEMORY: "insufficient memory",
    Reason.INSUFFICIENT_CORES: "insufficient cores",
    Reason.UNHEALTHY: "unhealthy",
    Reason.CORDONED: "cordoned",
    Reason.NUMA: "not enough cards on one NUMA node",
    Reason.EXCLUSIVE: "in use, exclusive card wanted",
    Reason.MODE: "mode mismatch",
    Reason.MIG_TOPOLOGY: "no free MIG placement",
    Reason.QUOTA: "over namespace quota",
    Reason.NOT_ENOUGH_CARDS: "not enough cards",
    Reason.TOO_FEW_LEFT: "too few cards left",
    Reason.NODE_UNREGISTERED: "node has not registered GPUs",
    Reason.POLICY: "invalid scheduling policy",
    Reason.UNRECORDED: "occupancy record incomplete",
}


@dataclass(frozen=True, slots=True)
class CardRejection:
    """One card turned down for one container, with the reason and the numbers behind it."""

    uuid: str
    reason: Reason
    need: int = 0
    free: int = 0


@dataclass(frozen=True, slots=True)
class NodeRejection:
    """Why a whole node cannot take the pod: a summary line and the per-card rejections.

    `considered` is how many cards were looked at; those not in `cards` passed every per-card
    rule but were too few (on one NUMA node, when `reason` is NumaNotFit). `taken` is how many
    devices the fit held when it ran out, a MIG card once per instance: on a NUMA shortfall the
    last NUMA node's, which HAMi counts as AllocatedCardsInsufficientRequest and the others'
    cards as NumaNotFit (all of them, when `taken` is None).
    """

    node: str
    reason: Reason
    message: str
    cards: tuple[CardRejection, ...] = ()
    considered: int = 0
    taken: int | None = None

    @property
    def line(self) -> str:
        """A person's sentence first, HAMi's reason tokens in brackets for tools that grep
        them: what the filter's FailedNodes says of the node."""
        return f"{self.message} [{self.hami_reason}]"

    @property
    def hami_reason(self) -> str:
        """HAMi's wire form (its GenReason): each reason with its count over all cards
        considered, the items sorted as text. Cards that passed every rule count as
        AllocatedCardsInsufficientRequest, on a NUMA shortfall only as far as `taken`.

        >>> quota = CardRejection("GPU-b", Reason.QUOTA)
        >>> NodeRejection("n", Reason.QUOTA, "", (quota,) * 3, considered=4).hami_reason
        '1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit'
        >>> NodeRejection("n", Reason.NUMA, "", considered=3, taken=1).hami_reason
        '1/3 AllocatedCardsInsufficientRequest, 2/3 NumaNotFit'
        """
        total = max(self.considered, len(self.cards))
        if not total:
            return self.reason.value
        counts = Counter(c.reason for c in self.cards)
        passed = total - len(self.cards)
        if self.reason is Reason.NUMA:
            held = self.taken or 0
            counts[Reason.TOO_FEW_LEFT] += held
            counts[Reason.NUMA] += passed - held
        else:  # a MIG card may have given several instances before it ran out
            counts[Reason.TOO_FEW_LEFT] += max(passed, self.taken or 0)
        return gen_reason({r.value: n for r, n in counts.items() if n > 0}, total)


def summarize_cards(rejections: Iterable[CardRejection], prefix: str = "") -> str:
    """`3 cards: 2 insufficient memory (need 20000 MiB, best card has 12000 free), 1 type
    mismatch` — commonest reason first, one example detail per reason."""
    items = list(rejections)
    counts = Counter(r.reason for r in items)
    parts = []
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].value)):
        parts.append(f"{n} {_PHRASES[reason]}{_shortfall(reason, items)}")
    noun = "card" if len(items) == 1 else "cards"
    return f"{prefix}{len(items)} {noun}: " + ", ".join(parts)


def _shortfall(reason: Reason, items: list[CardRejection]) -> str:
    unit = _UNITS.get(reason)
    if unit is None:
        return ""
    of_reason = [r for r in items if r.reason is reason]
    best = max(r.free for r in of_reason)
    return f" (need {of_reason[0].need} {unit}, best card has {best} free)"


_UNITS = {Reason.INSUFFICIENT_MEMORY: "MiB", Reason.INSUFFICIENT_CORES: "cores"}


def phrase(reason: Reason) -> str:
    return _PHRASES[reason]


def gen_reason(counts: Mapping[str, int], cards: int) -> str:
    """HAMi's GenReason: `count/cards reason` for each reason, sorted as text, comma-joined.

    >>> gen_reason({"CardNotHealth": 1, "CardInsufficientMemory": 3}, 4)
    '1/4 CardNotHealth, 3/4 CardInsufficientMemory'
    """
    return ", ".join(sorted(f"{n}/{cards} {reason}" for reason, n in counts.items()))


def parse_reason(text: str) -> dict[str, int]:
    """HAMi's ParseReason: each `count/cards reason` item of a filter failure, by reason;
    items not of that shape are skipped, and a reason listed twice keeps its last count.

    >>> parse_reason("3/8 CardInsufficientMemory, 2/8 CardInsufficientCore, bad, 3/8 CardNotHealth")
    {'CardInsufficientMemory': 3, 'CardInsufficientCore': 2, 'CardNotHealth': 3}
    """
    counts: dict[str, int] = {}
    for item in text.split(", "):
        match = _REASON_ITEM.match(item)
        if match is None:
            continue
        try:
            counts[match.group(2)] = whole_number(match.group(1), *INT64)
        except ValueError:  # Sscanf fails on a number past int64: the item is skipped
            continue
    return counts


# Go's Sscanf("%d/%d %s"): signed ASCII numbers, spaces before the word, the word up to a space
_REASON_ITEM = re.compile(r"\s*([+-]?[0-9]+)/[+-]?[0-9]+\s*(\S+)")
