"""How well two GPUs are connected, and which cards a `topology-aware` request should get.

The device plugin turns each ordered pair's links into a score (HAMi's rule,
docs/protocol.md#pair-scores):
the PCIe path's points (10 across CPUs .. 60 on the same board) plus 100 per NVLink between
them. It publishes the scores in `hami.io/node-nvidia-score` (13.2). The scheduler, for a
request of k cards among the candidates that passed every other filter (13.3), takes the
k-subset with the highest sum of pair scores, or for one card the card with the lowest sum to
the others, which keeps well-connected groups free for later multi-card pods.

>>> switch = PcieLink.SINGLE_SWITCH
>>> pair_scores([GpuLink("a", "b", switch, 4), GpuLink("b", "a", switch, 4)]).scores
{'a': {'b': 450}, 'b': {'a': 450}}
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import combinations
from typing import Any

from vgpu.domain.errors import CodecError
from vgpu.domain.hostile_text import read_json

SCORE_ANNOTATION = "hami.io/node-nvidia-score"
"""The Node annotation where the device plugin publishes every card pair's link points."""
NVLINK_POINTS = 100
MAX_NVLINKS = 36  # NVML_NVLINK_MAX_LINKS in current drivers (18 before)

PairScores = Mapping[str, Mapping[str, int]]  # uuid -> other uuid -> score


class PcieLink(Enum):
    """The closest common PCIe ancestor of two GPUs (NVML's topology level), with its points."""

    CROSS_CPU = 10  # NVML_TOPOLOGY_SYSTEM: across the CPU interconnect
    SAME_CPU = 20  # NVML_TOPOLOGY_NODE: same NUMA node, different host bridges
    HOST_BRIDGE = 30  # NVML_TOPOLOGY_HOSTBRIDGE
    MULTI_SWITCH = 40  # NVML_TOPOLOGY_MULTIPLE: several PCIe switches
    SINGLE_SWITCH = 50  # NVML_TOPOLOGY_SINGLE: one PCIe switch
    SAME_BOARD = 60  # NVML_TOPOLOGY_INTERNAL: two GPUs on one board


@dataclass(frozen=True, slots=True)
class GpuLink:
    """What `source` sees of its path to `target`: the PCIe ancestor and its NVLinks to it
    (direct links, or NVSwitch links counted as HAMi does)."""

    source: str
    target: str
    pcie: PcieLink
    nvlinks: int = 0

    def __post_init__(self) -> None:
        if self.source == self.target:
            raise ValueError(f"a GPU link needs two GPUs, got {self.source} twice")
        if not 0 <= self.nvlinks <= MAX_NVLINKS:
            raise ValueError(f"nvlinks={self.nvlinks} must be 0..{MAX_NVLINKS}")

    @property
    def score(self) -> int:
        """The pair's points as HAMi counts them: the PCIe link's, plus 100 per NVLink."""
        return self.pcie.value + NVLINK_POINTS * self.nvlinks


@dataclass(frozen=True, slots=True)
class Topology:
    """Pair scores of a node's GPUs, and the pairs whose two directions disagree on NVLinks
    (HAMi scores those 0 and warns with reason `AsymmetricGPUP2PLink`)."""

    scores: dict[str, dict[str, int]]
    asymmetric: tuple[tuple[str, str], ...] = field(default=())


def pair_scores(links: Iterable[GpuLink]) -> Topology:
    """Every ordered pair's score from the links NVML reported, in the order given."""
    by_pair = {(link.source, link.target): link for link in links}
    scores: dict[str, dict[str, int]] = {}
    asymmetric: list[tuple[str, str]] = []
    for (source, target), link in by_pair.items():
        back = by_pair.get((target, source))
        symmetric = back is None or back.nvlinks == link.nvlinks
        if not symmetric and (target, source) not in asymmetric:
            asymmetric.append((source, target))
        scores.setdefault(source, {})[target] = link.score if symmetric else 0
    return Topology(scores, tuple(asymmetric))


_HAMI_PCIE_NAMES = {
    "P2PLinkCrossCPU": PcieLink.CROSS_CPU,
    "P2PLinkSameCPU": PcieLink.SAME_CPU,
    "P2PLinkHostBridge": PcieLink.HOST_BRIDGE,
    "P2PLinkMultiSwitch": PcieLink.MULTI_SWITCH,
    "P2PLinkSingleSwitch": PcieLink.SINGLE_SWITCH,
    "P2PLinkSameBoard": PcieLink.SAME_BOARD,
}
_COUNT_WORDS = (
    "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten",
    "Eleven", "Twelve", "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen",
)  # fmt: skip
LINK_NAME_POINTS: Mapping[str, int] = {
    "P2PLinkUnknown": 0,
    **{name: link.value for name, link in _HAMI_PCIE_NAMES.items()},
    "SingleNVLINKLink": NVLINK_POINTS,
    **{f"{word}NVLINKLinks": NVLINK_POINTS * n for n, word in enumerate(_COUNT_WORDS, 2)},
}
"""HAMi's P2PLinkType names (its device plugin's link list between two GPUs) and their points."""


def link_name_score(names: Iterable[str]) -> int:
    """The pair score of the links HAMi lists from one GPU to another, by its link type names
    (its calculateGPUPairScore); ValueError names a link type HAMi does not have.

    >>> link_name_score(["P2PLinkSameCPU", "FourNVLINKLinks"])
    420
    """
    total = 0
    for name in names:
        if name not in LINK_NAME_POINTS:
            raise ValueError(f"link type {name!r} is not one of HAMi's P2PLinkType names")
        total += LINK_NAME_POINTS[name]
    return total


def encode_pair_scores(scores: PairScores) -> str:
    """`hami.io/node-nvidia-score`: `[{"uuid":..,"score":{other: int, ..}}, ..]`, compact."""
    document = [{"uuid": uuid, "score": dict(others)} for uuid, others in scores.items()]
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def decode_pair_scores(text: str) -> dict[str, dict[str, int]]:
    """The scores in a `hami.io/node-nvidia-score` value; CodecError naming the entry at fault."""
    raw: Any = read_json(text, SCORE_ANNOTATION)
    if not isinstance(raw, list):
        raise CodecError(SCORE_ANNOTATION, "top level", "expected a JSON array of GPUs")
    scores: dict[str, dict[str, int]] = {}
    for position, entry in enumerate(raw):
        where = f"entry #{position}"
        if not isinstance(entry, dict) or not isinstance(entry.get("uuid"), str):
            raise CodecError(SCORE_ANNOTATION, where, "expected an object with a string uuid")
        others = entry.get("score", {})
        if not isinstance(others, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in others.values()
        ):
            raise CodecError(SCORE_ANNOTATION, where, "score must map GPU uuids to integers")
        scores[entry["uuid"]] = dict(others)
    return scores


def score_between(scores: PairScores, a: str, b: str) -> int:
    """`a`'s score towards `b`; 0 when the annotation does not list the pair."""
    return scores.get(a, {}).get(b, 0)


def group_score(scores: PairScores, cards: Sequence[str]) -> int:
    """The sum of pair scores over the unordered pairs of `cards` (each pair read from the
    first card's side, as HAMi does)."""
    return sum(score_between(scores, a, b) for a, b in combinations(cards, 2))


def best_combination(candidates: Sequence[str], count: int, scores: PairScores) -> tuple[str, ...]:
    """The `count` candidates with the best links among themselves; the first found wins ties.
    Scores may be negative (a published score is any integer): the best sum still wins.

    >>> s = {"a": {"b": 60, "c": 460}, "b": {"a": 60, "c": 60}, "c": {"a": 460, "b": 60}}
    >>> best_combination(["a", "b", "c"], 2, s)
    ('a', 'c')
    >>> best_combination(["a", "b", "c"], 2, {"a": {"b": -5, "c": -3}, "b": {"c": -1}})
    ('b', 'c')
    """
    _check_count(candidates, count)
    best: tuple[str, ...] = ()
    best_score = 0
    for group in combinations(candidates, count):
        total = group_score(scores, group)
        if not best or total > best_score:
            best, best_score = group, total
    return best


def least_connected_card(candidates: Sequence[str], scores: PairScores) -> str:
    """The candidate whose links to the other candidates add up lowest; first found on ties.

    >>> s = {"a": {"b": 460, "c": 20}, "b": {"a": 460, "c": 20}, "c": {"a": 20, "b": 20}}
    >>> least_connected_card(["a", "b", "c"], s)
    'c'
    """
    _check_count(candidates, 1)
    totals = [
        sum(score_between(scores, card, other) for other in candidates if other != card)
        for card in candidates
    ]
    return candidates[totals.index(min(totals))]


def choose_cards(
    candidates: Sequence[str], count: int, scores: PairScores
) -> tuple[str, ...] | None:
    """HAMi's `topology-aware` choice among `candidates` (in the policy's order), or None when
    there are fewer than `count` (the node then fails with AllocatedCardsInsufficientRequest).
    """
    if count < 1:
        raise ValueError(f"count={count} must be at least 1")
    if len(candidates) < count:
        return None
    if len(candidates) == count:
        return tuple(candidates)
    if count == 1:
        return (least_connected_card(candidates, scores),)
    return best_combination(candidates, count, scores)


def _check_count(candidates: Sequence[str], count: int) -> None:
    if not 1 <= count <= len(candidates):
        raise ValueError(f"cannot choose {count} card(s) from {len(candidates)} candidate(s)")
