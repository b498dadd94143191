"""FGD-balanced (`balanced.py`) on the cards vgpu registers, as the scheduler runs it.

The trace replay's rules, read off the scheduler's terms: a card kind (type, memory, cores)
stands for a card model, a shape's milli on it is what one slice takes of such a card
(`CardShape.taken_on`), a shape is pinned when it names the card types it takes or avoids
(`nvidia.com/use-gputype`, `nvidia.com/nouse-gputype`), and the cluster's cards are counted per
kind. A node's free CPU and host memory that are not known are enough for every shape.

A shape's GPU, for the claims, is its count x cards x its milli, the milli averaged over the
cluster's cards it accepts (exactly its milli when it asks a percent of each card, as the
trace's pods do): the claims are then the replay's, to the last bit.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from vgpu.domain.device import Device
from vgpu.domain.fragmentation.balanced import BalancedTable, model_claims
from vgpu.domain.fragmentation.workload import TypicalShape

if TYPE_CHECKING:  # cards.py imports this module
    from vgpu.domain.fragmentation.cards import CardShape

CardKind = tuple[str, int, int]  # a card's type, memory (MiB) and cores: cards FGD weighs alike
CardCounts = tuple[tuple[CardKind, int], ...]  # how many cards of each kind a cluster has
Host = (
    tuple[int, int] | None
)  # a node's free CPU (milli-cores) and host memory (MiB); None: unknown
_ANY = 1 << 62  # CPU or memory enough for every shape


def card_kind(device: Device) -> CardKind:
    return device.type, device.memory, device.cores


class CardBalanced:
    """FGD-balanced against weighted card shapes on a cluster with `cards` cards of each kind,
    with a `BalancedTable` per card kind."""

    def __init__(self, shapes: Sequence[tuple["CardShape", int]], cards: CardCounts) -> None:
        self.shapes = tuple(shapes)
        self.cards = cards
        self._total = sum(count for _, count in shapes)
        self._gpu_total = sum(count for shape, count in shapes if shape.count)
        self._claims = _claims(self.shapes, cards)
        self._tables: dict[CardKind, BalancedTable] = {}

    def table_for(self, device: Device) -> BalancedTable:
        kind = card_kind(device)
        table = self._tables.get(kind)
        if table is None:
            fitting = fitting_shapes(self.shapes, device)
            claim = self._claims.get(kind, 0.0)
            table = BalancedTable(fitting, self._total, self._gpu_total, claim)
            self._tables[kind] = table
        return table

    def score(
        self,
        devices: Sequence[Device],
        before: Sequence[int],
        after: Sequence[int],
        host: Host,
        host_after: Host,
    ) -> int:
        """The score (0..99) of a node of these cards whose free shares go from `before` to
        `after` and whose free CPU and memory go from `host` to `host_after`; its first card's
        kind stands for the node's."""
        table = self.table_for(devices[0])
        start = table.fragmentation(*_free(host), tuple(sorted(before, reverse=True)))
        end = table.fragmentation(*_free(host_after), tuple(sorted(after, reverse=True)))
        return table.score(start - end, sum(before) - sum(after))

    def card_scores(
        self,
        devices: Sequence[Device],
        before: Sequence[int],
        changes: Sequence[tuple[int, int]],
        host: Host,
        host_after: Host,
    ) -> list[int]:
        """`score` for each (card position, its free share after) change on its own."""
        table = self.table_for(devices[0])
        start = table.fragmentation(*_free(host), tuple(sorted(before, reverse=True)))
        cpu, memory = _free(host_after)
        scores = []
        for position, share in changes:
            after = list(before)
            after[position] = share
            end = table.fragmentation(cpu, memory, tuple(sorted(after, reverse=True)))
            scores.append(table.score(start - end, before[position] - share))
        return scores


def fitting_shapes(shapes: Sequence[tuple["CardShape", int]], device: Device) -> list[TypicalShape]:
    """The shapes that may use cards like `device`, as the trace's shapes: the milli a slice
    takes of such a card, and the pod's CPU and host memory."""
    return [
        TypicalShape(
            count, shape.count, shape.taken_on(device), shape.cpu, memory=shape.host_memory
        )
        for shape, count in shapes
        if shape.accepts(device)
    ]


def _claims(shapes: Sequence[tuple["CardShape", int]], cards: CardCounts) -> dict[CardKind, float]:
    """Each card kind's claim (`model_claims`)."""
    probes = [(kind, n, Device("", 0, kind[0], 1, kind[1], kind[2])) for kind, n in cards]
    demands: list[tuple[Fraction, set[CardKind] | None]] = []
    for shape, count in shapes:
        if not shape.count:
            demands.append((Fraction(0), None))
            continue
        accepted = [(kind, n, probe) for kind, n, probe in probes if shape.accepts(probe)]
        over = accepted or probes
        cards_over = sum(n for _, n, _ in over)
        milli = Fraction(sum(n * shape.taken_on(probe) for _, n, probe in over), cards_over or 1)
        models = {kind for kind, _, _ in accepted} if shape.pinned else None
        demands.append((count * shape.count * milli, models))
    return model_claims(demands, dict(cards))


def _free(host: Host) -> tuple[int, int]:
    return (_ANY, _ANY) if host is None else host
