"""`hami.io/device-scoring-weights`: how much slots, cores and memory count in a card's score.

HAMi v2.10 scores a card as `10 x (slot x used_slots/count + core x used_cores/total_cores +
memory x used_memory/total_memory)`; the pod annotation sets the three weights, written exactly
as `slot=<int>,core=<int>,memory=<int>` (any order, spaces allowed, each non-negative, at least
one positive). Without the annotation every weight is 1. A bad value fails the pod's scheduling
with the reason, never falls back to the defaults (docs/protocol.md#device-scoring-weights).

>>> parse_scoring_weights("slot=1, core=1, memory=3")
ScoringWeights(slot=1, core=1, memory=3)
>>> weights_from_annotations({})
ScoringWeights(slot=1, core=1, memory=1)
"""

from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.domain.errors import CodecError, brief
from vgpu.domain.hostile_text import INT64, whole_number

SCORING_WEIGHTS_ANNOTATION = "hami.io/device-scoring-weights"
_KEYS = ("slot", "core", "memory")


@dataclass(frozen=True, slots=True)
class ScoringWeights:
    """How much the used share of slots, cores and memory each count in a card's score
    (`hami.io/device-scoring-weights`); every weight is 1 by default."""

    slot: int = 1
    core: int = 1
    memory: int = 1

    def weigh(self, slots: float, cores: float, memory: float) -> float:
        """A card's score from its used fractions (0..1) of slots, cores and memory.

        >>> ScoringWeights(slot=0, core=0, memory=2).weigh(0.5, 0.5, 0.25)
        5.0
        """
        return 10 * (self.slot * slots + self.core * cores + self.memory * memory)


DEFAULT_WEIGHTS = ScoringWeights()
"""The weights of a pod without `hami.io/device-scoring-weights`: 1, 1 and 1."""


def weights_from_annotations(annotations: Mapping[str, str]) -> ScoringWeights:
    """The pod's weights: its annotation's, or the defaults when it has none."""
    value = annotations.get(SCORING_WEIGHTS_ANNOTATION)
    return DEFAULT_WEIGHTS if value is None else parse_scoring_weights(value)


def parse_scoring_weights(value: str) -> ScoringWeights:
    """The weights in `value`; CodecError naming the item at fault and why."""

    def fail(where: str, problem: str) -> CodecError:
        return CodecError(SCORING_WEIGHTS_ANNOTATION, where, problem)

    items = value.split(",")
    if len(items) != len(_KEYS):
        raise fail(
            "whole value",
            f"{brief(value)} has {len(items)} item(s); expected exactly slot=<int>,core=<int>,"
            "memory=<int>",
        )
    found: dict[str, int] = {}
    for position, item in enumerate(items):
        key, equals, text = (part.strip() for part in item.partition("="))
        where = f"item #{position} ({brief(item.strip())})"
        if not equals:
            raise fail(where, "expected key=value")
        if key not in _KEYS:
            raise fail(where, f"unknown key {brief(key)}; the keys are slot, core and memory")
        if key in found:
            raise fail(where, f"{key} is given twice")
        try:
            number = whole_number(text, *INT64)
        except ValueError:
            raise fail(where, f"{key}={brief(text)} is not a whole number") from None
        if number < 0:
            raise fail(where, f"{key}={number} is negative; weights are 0 or more")
        found[key] = number
    if not any(found.values()):
        raise fail("whole value", "every weight is 0; at least one must be positive")
    return ScoringWeights(**found)
