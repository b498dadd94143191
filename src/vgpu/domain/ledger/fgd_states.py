"""FGD's (and FGD-balanced's) best node, asked of node states rather than of every node.

FGD's score has no bound a walk could stop at, so every candidate node must answer. But a
node's answer depends only on its *state*: its cards and their usage (its kind, as the index's
alike rejections read it), and its free CPU and memory as the policy reads them
(`fgd_host_levels`: FGD only which of the typical shapes' CPU sizes its free CPU covers before
and after the pod, FGD-balanced both exactly). Nodes in one state answer alike (up to their
card ids), and there are far fewer states than nodes: idle nodes of a model are one, and nodes
running the same pods meet in the same states.

So per pod shape this remembers each state's answer, fitted once on the first node found in
it (most states new to a shape are ruled out by the node's summary, without a fit), and each
node's state until the node changes; a decision is then a lookup per candidate, and only the
chosen node's cards are worked out, from the answer of its state. Remembering answers node by
node instead, a node that changed would be fitted again for each of the workload's tens of pod
shapes.
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import compress, repeat
from typing import Any, cast

from vgpu.domain.device import Device
from vgpu.domain.fit import NodeFit, PodPlan, fgd_host_levels
from vgpu.domain.host import HostResources
from vgpu.domain.ledger.node_summary import NodeSummary, PodNeeds
from vgpu.domain.reasons import NodeRejection

State = tuple[
    int, HostResources | None
]  # the node's kind, its free CPU and memory (None: not known)
Cards = tuple[Device, ...]
Describe = Callable[[str], tuple[int, Cards, HostResources | None] | None]  # kind, cards, free
_Levels = tuple[int, ...]  # a kind, and its free CPU and memory as the pod's policy reads them
_OWN: State = (-1, None)  # a node fitted on its own (cards of its own sort, or not indexed)
_OWN_NUMBER = 0
# scores are 0.0 .. 3.0; these stand for "not worked out yet" and "the pod does not fit", so
# that a decision's passes over the candidates run in C (map, max, count, index)
_MISSING = -1.0
_NO_FIT = -2.0


@dataclass(frozen=True, slots=True)
class _Fitted:
    """A state's fit, on the node it was fitted on, with that node's cards."""

    fit: NodeFit
    devices: Cards

    def on(self, node: str, devices: Cards) -> NodeFit:
        """The same placement on `node`, alike card for card: its own card ids, by position."""
        if devices is self.devices:
            return self.fit
        position = {device.uuid: i for i, device in enumerate(self.devices)}
        grants = tuple(
            tuple(replace(grant, uuid=devices[position[grant.uuid]].uuid) for grant in container)
            for container in self.fit.grants
        )
        return NodeFit(node, grants, self.fit.fullness)


class FgdStates:
    """The index's helper for FGD (`LedgerIndex.decide`). The index describes a node
    (`describe`: its kind, its cards and its free CPU and memory; None for a node fitted on its
    own), fits
    it (`fit`) and summarizes it (`summary`)."""

    def __init__(self) -> None:
        # states by number (a dictionary lookup by int is the cheapest there is)
        self._numbers: dict[State, int] = {_OWN: _OWN_NUMBER}
        self._numbered: list[State] = [_OWN]
        self._states: dict[str, int] = {}  # node: its state's number
        self._cards: dict[str, Cards] = {}
        self._scores: dict[int, dict[int, float]] = {}  # by shape, then state
        self._fitted: dict[int, dict[_Levels, _Fitted | None]] = {}  # by shape

    def forget(self, node: str) -> None:
        """The node changed (or left): its state is worked out again on first need."""
        self._states.pop(node, None)
        self._cards.pop(node, None)

    def clear(self) -> None:
        """Forget every answer (memory's bound). Never needed for the answers to be right:
        the index never gives a kind's or a shape's number to another."""
        self._scores.clear()
        self._fitted.clear()
        self._states.clear()
        del self._numbered[1:]
        self._numbers = {_OWN: _OWN_NUMBER}

    def best(
        self,
        plan: PodPlan,
        shape: int,
        candidates: Iterable[str],
        describe: Describe,
        fit: Callable[[str], NodeFit | NodeRejection],
        summary: Callable[[str], NodeSummary],
        bound: int,
    ) -> NodeFit | None:
        """The fit with the highest score among the candidates (ties: the first name), or None
        when none fits. `bound`: states remembered (in all, and per pod shape) before they are
        forgotten."""
        if len(self._numbered) > bound:
            self.clear()
        scores = self._scores.get(shape)
        fitted = self._fitted.get(shape)
        if scores is None or fitted is None or len(scores) > bound:
            scores = self._scores[shape] = {}
            fitted = self._fitted[shape] = {}
        nodes = list(candidates)
        known = list(map(self._states.get, nodes))
        for i in _positions(known, None):  # nodes changed since they were last asked
            known[i] = self._state_of(nodes[i], describe)
        numbers = cast(list[int], known)
        values = cast(list[float], list(map(scores.get, numbers, repeat(_MISSING))))
        own: dict[str, NodeFit] = {}
        if _MISSING in values:
            host_levels, needs = fgd_host_levels(plan), PodNeeds.of(plan)
            for i in _positions(values, _MISSING):  # states new to this shape
                node, number = nodes[i], numbers[i]
                if number == _OWN_NUMBER:
                    answer = fit(node)
                    if type(answer) is NodeFit:
                        own[node] = answer
                    values[i] = answer.fullness if type(answer) is NodeFit else _NO_FIT
                    continue
                kind, host = self._numbered[number]
                levels = (kind, *host_levels(host))
                if levels not in fitted:
                    fitted[levels] = _fitted(node, self._cards[node], needs, fit, summary)
                found = fitted[levels]
                values[i] = scores[number] = _NO_FIT if found is None else found.fit.fullness
        top = max(values, default=_NO_FIT)
        if top == _NO_FIT:
            return None
        best = min(compress(nodes, map(top.__eq__, values)))  # ties: the first name
        if best in own:
            return own[best]
        kind, host = self._numbered[self._states[best]]
        found = fitted.get((kind, *fgd_host_levels(plan)(host)))
        if found is None:  # cannot be: this decision or an earlier one fitted the state
            raise AssertionError(f"FGD: no fit remembered for the state of node {best}")
        return found.on(best, self._cards[best])

    def _state_of(self, node: str, describe: Describe) -> int:
        """The node's state's number, worked out (and remembered until the node changes)."""
        described = describe(node)
        state = _OWN
        if described is not None:
            kind, self._cards[node], host = described
            state = (kind, host)
        number = self._numbers.get(state)
        if number is None:
            number = self._numbers[state] = len(self._numbered)
            self._numbered.append(state)
        self._states[node] = number
        return number


def _positions(values: list[Any], value: object) -> Iterator[int]:
    """Where `value` is in `values`, searched in C (`list.index`): few places of many."""
    at = -1
    try:
        while True:
            at = values.index(value, at + 1)
            yield at
    except ValueError:
        return


def _fitted(
    node: str,
    cards: Cards,
    needs: PodNeeds,
    fit: Callable[[str], NodeFit | NodeRejection],
    summary: Callable[[str], NodeSummary],
) -> _Fitted | None:
    """The state's answer, fitted on `node`: None where the pod does not fit."""
    if not needs.may_fit(summary(node)):  # most states new to a shape: ruled out unfitted
        return None
    answer = fit(node)
    return _Fitted(answer, cards) if type(answer) is NodeFit else None
