"""HAMi's card order for a GPU policy string, from scores computed elsewhere.

HAMi reads `hami.io/gpu-scheduler-policy` (or its default) as written: a single word, or a
comma list whose `binpack`, `spread` and `numa` are sort keys in the order given (`mutex` and
`topology-aware` are filters of its Fit, not keys). It sorts a node's cards ascending by the
comparison below and its Fit takes them from the end, so the card it prefers sorts last.
`card_order` (vgpu.domain.fit) is vgpu's own order, scores included; these functions let a
scheduler that computes HAMi's scores itself reproduce HAMi's order step by step.

>>> cards = [ScoredCard(Device(f"GPU-{i}", i, "A100", 4, 40000, numa=i % 2), s)
...          for i, s in enumerate((5.0, 9.0, 7.0))]
>>> [c.device.uuid for c in order_scored_cards(cards, "binpack")]
['GPU-1', 'GPU-2', 'GPU-0']
>>> [c.device.uuid for c in order_scored_cards(cards, "numa,spread")]
['GPU-1', 'GPU-0', 'GPU-2']
"""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cmp_to_key

from vgpu.domain.device import Device

BINPACK = "binpack"
SPREAD = "spread"
NUMA = "numa"
MUTEX = "mutex"
_SORT_KEYS = (BINPACK, SPREAD, NUMA)


@dataclass(frozen=True, slots=True)
class ScoredCard:
    """A card with the score HAMi's ComputeScore gave it for the pod's request, and how many
    containers use it now (the single word `mutex` puts busy cards first)."""

    device: Device
    score: float
    used: int = 0


def policy_contains(policy: str, name: str) -> bool:
    """Whether the comma list `policy` names `name` (HAMi's PolicyContains: each word trimmed,
    compared exactly).

    >>> policy_contains("binpack, topology-aware", "topology-aware"), policy_contains("numa", "num")
    (True, False)
    """
    return any(word.strip() == name for word in policy.split(","))


def sort_keys(policy: str) -> tuple[str, ...]:
    """The sort keys a comma list names, in its order, each once (HAMi's gpuSortKeyChain).

    >>> sort_keys("mutex,numa, binpack,numa")
    ('numa', 'binpack')
    """
    keys = [word.strip() for word in policy.split(",")]
    return tuple(dict.fromkeys(key for key in keys if key in _SORT_KEYS))


def sorts_before(a: ScoredCard, b: ScoredCard, policy: str, numa_bind: bool = False) -> bool:
    """HAMi's DeviceUsageList.Less: whether its ascending sort puts `a` before `b` (its Fit then
    prefers `b`). `numa_bind` is the pod's `nvidia.com/numa-bind`, which keeps a NUMA node's
    cards together.

    >>> busy = ScoredCard(Device("a", 0, "T4", 4, 16000), 10.0, used=2)
    >>> idle = ScoredCard(Device("b", 1, "T4", 4, 16000), 20.0)
    >>> sorts_before(busy, idle, "mutex"), sorts_before(busy, idle, "mutex,spread")
    (True, False)
    """
    if "," in policy or policy == NUMA:
        return _before_by_chain(a, b, sort_keys(policy), numa_bind)
    numa_a, numa_b = a.device.numa, b.device.numa
    binpack = policy == BINPACK
    if policy == MUTEX:
        if a.used != b.used:
            return a.used > b.used
        return numa_a < numa_b
    if numa_bind:
        if numa_a != numa_b:
            return numa_a > numa_b if binpack else numa_a < numa_b
        return a.score < b.score if binpack else a.score > b.score
    if a.score != b.score:
        return a.score < b.score if binpack else a.score > b.score
    return numa_a < numa_b


def order_scored_cards(
    cards: Iterable[ScoredCard], policy: str, numa_bind: bool = False
) -> tuple[ScoredCard, ...]:
    """The cards in the order HAMi's Fit tries them: its ascending sort, from the end.

    Equal cards come last-given first, as HAMi's sort leaves up to 12 cards (an insertion sort,
    which keeps their order); for more, Go's sort keeps no order among equal cards.
    """

    def compare(a: ScoredCard, b: ScoredCard) -> int:
        if sorts_before(a, b, policy, numa_bind):
            return -1
        return 1 if sorts_before(b, a, policy, numa_bind) else 0

    return tuple(reversed(sorted(cards, key=cmp_to_key(compare))))


def _before_by_chain(a: ScoredCard, b: ScoredCard, keys: tuple[str, ...], numa_bind: bool) -> bool:
    """The comma-list comparison: each key in turn, `spread` when none is named, `numa` first
    under `numa_bind`, and the card index when every key ties."""
    chain = keys or (SPREAD,)
    if numa_bind and chain[0] != NUMA:
        chain = (NUMA, *(key for key in chain if key != NUMA))
    for key in chain:
        if key == NUMA and a.device.numa != b.device.numa:
            return a.device.numa < b.device.numa
        if key != NUMA and a.score != b.score:
            return a.score < b.score if key == BINPACK else a.score > b.score
    return a.device.index < b.device.index
