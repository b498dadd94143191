"""FGD's (and FGD-balanced's) best node, asked of node states rather than of every node.

FGD's score has no bound a walk could stop at, so every candidate node must answer. But a
node's answer depends only on its *state*: its cards and their usage (its kind, as the index's
alike rejections read it), and its free CPU and memory as the policy reads them
(`fgd_host_levels`: FGD only which of the typical shapes' CPU sizes its free CPU covers before
and after the pod, FGD-balanced both exactly). Nodes in one state answer alike (up to their
card ids), and there are far fewer states than nodes: idle nodes of a model are one, and nodes
running the same pods meet in the same states.

So per pod shape this remembers each state's answer, fitted once on its first candidate by
name (most states new to a shape are ruled out by the node's summary, without a fit), and each
node's state until the node changes. Each state's nodes are kept sorted by name, so a decision
passes over the candidates once (in C: which states they are in); the rest is per state (a
lookup of its answer), and only the chosen node's cards are worked out, from the answer of its
state. Remembering answers node by node instead, a node that changed would be fitted again for
each of the workload's tens of pod shapes.
"""

from bisect import bisect_left, insort
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import cast

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
_NO_FIT = -2.0  # a state's score where the pod does not fit (scores are 0.0 .. 3.0)


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
    own), fits it (`fit`) and summarizes it (`summary`)."""

    def __init__(self) -> None:
        # states by number (a dictionary lookup by int is the cheapest there is)
        self._numbers: dict[State, int] = {_OWN: _OWN_NUMBER}
        self._numbered: list[State] = [_OWN]
        self._states: dict[str, int] = {}  # node: its state's number
        self._members: dict[int, list[str]] = {}  # state: its nodes, sorted by name
        self._stale: set[str] = set()  # nodes forgotten since they were last asked
        self._cards: dict[str, Cards] = {}
        self._scores: dict[int, dict[int, float]] = {}  # by shape, then state
        self._fitted: dict[int, dict[_Levels, _Fitted | None]] = {}  # by shape

    def forget(self, node: str, *, left: bool = False) -> None:
        """The node changed: its state is worked out again on first need; or it `left` the
        cluster: nothing of it is kept (autoscaled nodes come and go by the thousand)."""
        number = self._states.pop(node, None)
        if number is not None:
            members = self._members[number]
            del members[bisect_left(members, node)]
        if left:
            self._stale.discard(node)
        else:
            self._stale.add(node)
        self._cards.pop(node, None)

    def clear(self) -> None:
        """Forget every answer (memory's bound). Never needed for the answers to be right:
        the index never gives a kind's or a shape's number to another."""
        self._scores.clear()
        self._fitted.clear()
        self._stale.update(self._states)
        self._states.clear()
        self._members.clear()
        del self._numbered[1:]
        self._numbers = {_OWN: _OWN_NUMBER}

    def best(
        self,
        plan: PodPlan,
        shape: int,
        candidates: Mapping[str, None],
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
        for node in [n for n in self._stale if n in candidates]:  # changed since last asked
            self._state_of(node, describe)
        present = set(map(self._states.get, candidates))
        if None in present:  # nodes never asked before
            for node in candidates:
                if node not in self._states:
                    self._state_of(node, describe)
            present = set(map(self._states.get, candidates))
        numbers = cast(set[int], present)
        own = None
        if _OWN_NUMBER in numbers:  # nodes fitted each on its own
            numbers = numbers - {_OWN_NUMBER}
            own = self._best_own(candidates, fit)
        host_levels, needs = fgd_host_levels(plan), PodNeeds.of(plan)
        for number in [n for n in numbers if n not in scores]:  # states new to this shape
            first = self._first_candidate(number, candidates)
            kind, host = self._numbered[number]
            levels = (kind, *host_levels(host))
            if levels not in fitted:
                fitted[levels] = _fitted(first, self._cards[first], needs, fit, summary)
            found = fitted[levels]
            scores[number] = _NO_FIT if found is None else found.fit.fullness
        top = max(map(scores.__getitem__, numbers), default=_NO_FIT)
        if own is not None and own.fullness > top:
            return own
        if top == _NO_FIT:
            return own
        tied = [n for n in numbers if scores[n] == top]
        first, number = min((self._first_candidate(n, candidates), n) for n in tied)
        if own is not None and own.fullness == top and own.node < first:
            return own
        kind, host = self._numbered[number]
        found = fitted.get((kind, *host_levels(host)))
        if found is None:  # cannot be: this decision or an earlier one fitted the state
            raise AssertionError(f"FGD: no fit remembered for the state of node {first}")
        return found.on(first, self._cards[first])

    def _best_own(
        self, candidates: Mapping[str, None], fit: Callable[[str], NodeFit | NodeRejection]
    ) -> NodeFit | None:
        """The best fit among the candidates fitted on their own (ties: the first name)."""
        best = None
        for node in self._members[_OWN_NUMBER]:  # by name: the first of equals stays
            if node in candidates:
                answer = fit(node)
                if type(answer) is NodeFit and (best is None or answer.fullness > best.fullness):
                    best = answer
        return best

    def _first_candidate(self, number: int, candidates: Mapping[str, None]) -> str:
        """The state's first member by name among the candidates (it has one)."""
        return next(node for node in self._members[number] if node in candidates)

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
        insort(self._members.setdefault(number, []), node)
        self._stale.discard(node)
        return number


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
