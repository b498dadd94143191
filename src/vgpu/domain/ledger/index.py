"""The ledger's index: per-node summaries, nodes ordered by fullness, remembered rejections.

`LedgerIndex.decide` gives the same answer as `decide` over every candidate's view (node,
cards, score, ties by name; for a pod that fits nowhere, every node's rejection), but walks
the candidates from the best possible score down, skips nodes the summary rules out, runs the
exact `fit_pod` only on the rest and stops once no node left can beat the best fit found.

A node's answer (its fit or its rejection) is remembered per pod shape until that node changes,
so a run of similar pods over many equally good nodes (spread over identical nodes, where no
bound can stop the walk early) costs a lookup per node, since each placement changes one node
only. A decision that placed nothing is remembered whole, with the count of node changes it was
made at: kube-scheduler retrying a pod that fits nowhere costs a lookup per node, and a fresh
look at the nodes changed since. A pod that fits nowhere skips the ordered walk: a cheap pass
over the summaries shows first that no node has room.
"""

import math
from collections.abc import Callable, Iterable

from vgpu.domain.decision import Decision, NodeScore, NoPlacement, Placement, decide
from vgpu.domain.device import Device, Usage
from vgpu.domain.fit import NodeFit, NodeView, PodPlan, fit_pod
from vgpu.domain.host import HostResources
from vgpu.domain.ledger.alike_rejection import (
    AlikeRejection,
    Cards,
    Load,
    Model,
    cards_profile,
    groupable,
    load_profile,
)
from vgpu.domain.ledger.fgd_states import FgdStates
from vgpu.domain.ledger.fullness_order import Block, FullnessOrder
from vgpu.domain.ledger.node_summary import Capacity, NodeSummary, PodNeeds, summarize
from vgpu.domain.policy import FRAGMENTATION_POLICIES, preference
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.reasons import NodeRejection

# Bounds and exact scores are summed in different orders; a node whose bound is within this of
# the best score is still fitted, so rounding can never hide a better node or a tie.
_ROUNDING = 1e-9
_FEW = 4  # candidates fewer than 1/_FEW of the nodes are ranked directly, not walked
_REMEMBERED_PER_NODE = 4
_REFUSALS_KEPT = 8  # refused shapes whose answers are kept: 8 x 5,000 rejections is ~5 MB
_SHAPES_KEPT = 4096


class LedgerIndex:
    def __init__(self) -> None:
        self._summaries: dict[str, NodeSummary] = {}
        self._order = FullnessOrder()
        # per node in the index, its answers by pod shape; one dict kept for the node's life
        # (emptied on change), so remembering thousands of answers allocates nothing new
        self._answers: dict[str, dict[int, NodeFit | NodeRejection]] = {}
        self._shapes: dict[tuple[object, ...], int] = {}
        self._next_shape = 0
        # nodes alike card for card share a kind; a pod's rejection by one is every one's
        # node: its kind (-1: fitted on its own) and its cards
        self._kinds: dict[str, tuple[int, tuple[Device, ...]]] = {}
        self._kind_ids: dict[tuple[int, Load], tuple[int, NodeSummary]] = {}
        self._cards_of: dict[str, tuple[tuple[Device, ...], int]] = {}  # node's cards, their kind
        self._card_kinds: dict[Cards, int] = {}
        self._models: dict[int, dict[int, Model]] = {}  # by shape, then kind
        # a shape's last decision that placed nothing: when it was made, every node's rejection
        self._refusals: dict[int, tuple[int, dict[str, NodeRejection]]] = {}
        self._changed: dict[str, int] = {}  # node: the change count when it last changed
        self._changes = 0
        self._next_kind = 0
        self._fgd = FgdStates()  # FGD's answers by node state

    def update(
        self,
        node: str,
        devices: tuple[Device, ...],
        usage: dict[str, Usage],
        cordoned: frozenset[str],
    ) -> None:
        """The node's cards or usage changed."""
        self._changed[node] = self._changes
        self._changes += 1
        summary = summarize(devices, usage, cordoned)
        self._summaries[node] = summary
        self._order.put(node, summary.capacity, summary.fullness, summary.used)
        remembered = self._answers.get(node)
        if remembered is None:
            self._answers[node] = {}
        else:
            remembered.clear()
        self._kinds.pop(node, None)  # worked out again when a rejection needs it
        self._fgd.forget(node)
        cards = self._cards_of.get(node)
        if cards is None or cards[0] is not devices:  # new cards: seldom, once per node
            self._cards_of[node] = (devices, self._card_kind(devices))

    def settle(self, view: Callable[[str], NodeView]) -> None:
        """Work out every node's kind now rather than on first need (after a rebuild)."""
        for node in self._summaries:
            self._kind(node, view)

    def drop(self, node: str) -> None:
        self._changed.pop(node, None)
        self._cards_of.pop(node, None)
        self._summaries.pop(node, None)
        self._order.remove(node)
        self._answers.pop(node, None)
        self._kinds.pop(node, None)
        self._fgd.forget(node, left=True)

    def decide(
        self,
        plan: PodPlan,
        nodes: Iterable[str],
        view: Callable[[str], NodeView],
        budget: Budget = UNLIMITED,
    ) -> Decision:
        """The best placement among `nodes`; `scores` holds only the chosen node's score and
        `rejections` is empty. When the pod fits nowhere, every node's rejection."""
        # kube-scheduler's names, in its order, once each (a dict given is that already)
        candidates = nodes if type(nodes) is dict else dict.fromkeys(nodes)
        needs = PodNeeds.of(plan)
        shape = self._shape(plan, budget)
        alike = groupable(plan)
        policy = plan.policies.node
        # a pod refused last time (kube-scheduler retrying it): walk only the nodes that changed
        refused = self._refused(candidates, shape)
        walked = candidates if not refused else {n: None for n in candidates if n not in refused}
        best: NodeFit | None = None
        best_score = -math.inf
        checked, may_fit = None, False  # alike nodes share a summary: judge it once in a row
        blocks: Iterable[Block] = ()
        room = self._may_fit_any(needs, walked)
        if room and policy in FRAGMENTATION_POLICIES:  # no bound on the score: every node
            best = self._best_of_all(plan, walked, view, budget, shape, alike)
            best_score = -math.inf if best is None else best.fullness
        elif room:
            blocks = self._walk(plan, needs, walked)
        for bound, block in blocks:
            if bound + _ROUNDING < best_score:
                break
            for node in block:
                if node not in walked:
                    continue
                summary = self._summaries[node]
                if summary is not checked:
                    checked, may_fit = summary, needs.may_fit(summary)
                if not may_fit:
                    continue
                result = self._fit(plan, node, view, budget, shape, alike)
                if isinstance(result, NodeRejection):
                    continue
                score = preference(policy, result.fullness)
                if best is None or score > best_score or (score == best_score and node < best.node):
                    best, best_score = result, score
                if needs.fixed_score(summary.capacity):
                    break  # the rest of the block would score the same and lose the tie by name
        if best is not None:
            self._refusals.pop(shape, None)
            return Placement(best.node, best.grants, (NodeScore(best.node, best_score),))
        rejections = self._rejections(plan, candidates, view, budget, shape, alike, refused)
        if rejections is None:  # a summary ruled out a node that fits: be exact
            self._refusals.pop(shape, None)
            return decide(plan, [view(n) for n in candidates], budget)
        self._refusals.pop(shape, None)  # the newest last
        self._refusals[shape] = (self._changes, rejections)
        if len(self._refusals) > _REFUSALS_KEPT:
            del self._refusals[next(iter(self._refusals))]
        return NoPlacement(dict(rejections))

    def feasible(
        self,
        plan: PodPlan,
        nodes: Iterable[str],
        view: Callable[[str], NodeView],
        budget: Budget = UNLIMITED,
        fresh: str | None = None,
    ) -> Decision:
        """What `decide` answers over every candidate's view: every feasible node's score, best
        first, and every other node's rejection, from the remembered answers where the node is
        unchanged. `fresh` names a node whose view differs from the ledger's (a pod's own grant
        left out): it is fitted afresh and not remembered."""
        shape = self._shape(plan, budget)
        alike = groupable(plan)
        policy = plan.policies.node
        fits: list[NodeFit] = []
        rejections: dict[str, NodeRejection] = {}
        for node in dict.fromkeys(nodes):
            if node == fresh:
                result = fit_pod(plan, view(node), budget)
            else:
                result = self._fit(plan, node, view, budget, shape, alike)
            if isinstance(result, NodeRejection):
                rejections[node] = result
            else:
                fits.append(result)
        if not fits:
            return NoPlacement(rejections)
        scored = sorted(
            ((NodeScore(f.node, preference(policy, f.fullness)), f) for f in fits),
            key=lambda pair: (-pair[0].score, pair[0].node),
        )
        best = scored[0][1]
        return Placement(best.node, best.grants, tuple(s for s, _ in scored), rejections)

    def _best_of_all(
        self,
        plan: PodPlan,
        candidates: dict[str, None],
        view: Callable[[str], NodeView],
        budget: Budget,
        shape: int,
        alike: bool,
    ) -> NodeFit | None:
        """The fit with the highest score among every candidate (ties: the first name); the
        remembered answer where a node is unchanged (most nodes, between two pods)."""
        if alike:
            return self._fgd.best(
                plan,
                shape,
                candidates,
                lambda node: self._describe(node, view),
                lambda node: self._fit(plan, node, view, budget, shape, True),
                self._summaries.__getitem__,
                4 * len(self._summaries) + 1024,
            )
        answers = self._answers
        best: NodeFit | None = None
        for node in candidates:
            remembered = answers.get(node)
            result = remembered.get(shape) if remembered is not None else None
            if result is None:
                result = self._fit(plan, node, view, budget, shape, alike)
            if type(result) is NodeFit and (
                best is None
                or result.fullness > best.fullness
                or (result.fullness == best.fullness and node < best.node)
            ):
                best = result
        return best

    def _refused(self, candidates: dict[str, None], shape: int) -> dict[str, NodeRejection]:
        """The candidates' rejections from the last decision on this pod shape, if it placed
        nothing, for the nodes that have not changed since: only the others need a look."""
        refusal = self._refusals.get(shape)
        if refusal is None:
            return {}
        made_at, known = refusal
        changed, refused = self._changed, {}
        for node in candidates:
            rejection = known.get(node)
            if rejection is not None and changed.get(node, made_at) < made_at:
                refused[node] = rejection
        return refused

    def _may_fit_any(self, needs: PodNeeds, nodes: Iterable[str]) -> bool:
        """Whether any node's summary leaves room for the pod. A pass in no order, a fraction
        of the ordered walk's cost per node, left at the first node that may fit: a pod that
        fits nowhere (which the walk would follow to its end) skips the walk."""
        checked = None
        for summary in map(self._summaries.get, nodes):
            if summary is not checked and summary is not None:
                if needs.may_fit(summary):
                    return True
                checked = summary
        return False

    def _walk(self, plan: PodPlan, needs: PodNeeds, candidates: dict[str, None]) -> Iterable[Block]:
        policy = plan.policies.node

        def gain(capacity: Capacity) -> float:
            return needs.best_gain(policy, capacity)

        if len(candidates) * _FEW < len(self._order):
            return self._order.rank(candidates, policy, gain)
        return self._order.walk(policy, gain)

    def _rejections(
        self,
        plan: PodPlan,
        candidates: dict[str, None],
        view: Callable[[str], NodeView],
        budget: Budget,
        shape: int,
        alike: bool,
        refused: dict[str, NodeRejection],
    ) -> dict[str, NodeRejection] | None:
        """Every candidate's rejection (`refused`: those known already), or None when one of
        them takes the pod. This is `_fit` node by node, with the common case inlined: a node
        whose kind already has this shape's rejection gets a copy of it (thousands of nodes
        for a pod that fits nowhere, where a call per node costs as much as the copy), not
        remembered node by node: the whole answer is (`_refusals`)."""
        rejections: dict[str, NodeRejection] = {}
        kinds, like = self._kinds, AlikeRejection.like
        models = self._models.setdefault(shape, {}) if alike else {}
        for node in candidates:
            result = refused.get(node) if refused else None
            if result is None:
                found = kinds.get(node)
                model = models.get(found[0]) if found is not None else None
                if found is None or model is None:
                    fitted = self._fit(plan, node, view, budget, shape, alike)
                    if isinstance(fitted, NodeFit):
                        return None
                    result = fitted
                else:
                    result = like(node, model, found[1])
            rejections[node] = result
        return rejections

    def _fit(
        self,
        plan: PodPlan,
        node: str,
        view: Callable[[str], NodeView],
        budget: Budget,
        shape: int,
        alike: bool,
    ) -> NodeFit | NodeRejection:
        """The node's answer: remembered, copied from an alike node's rejection (`alike`: the
        pod's fit reads no card ids), or fitted."""
        remembered = self._answers.get(node)  # None: a node not in the index
        if remembered is not None and shape in remembered:
            return remembered[shape]
        kind = self._kind(node, view) if alike else None
        models = self._models.setdefault(shape, {}) if kind is not None else {}
        model = models.get(kind[0]) if kind is not None else None
        if kind is not None and model is not None:
            result: NodeFit | NodeRejection = AlikeRejection.like(node, model, kind[1])
        else:
            result = fit_pod(plan, view(node), budget)
            if kind is not None and isinstance(result, NodeRejection):
                models[kind[0]] = Model(result, kind[1])
        if remembered is not None:
            if len(remembered) >= _REMEMBERED_PER_NODE:
                remembered.clear()
            remembered[shape] = result
        return result

    def _describe(
        self, node: str, view: Callable[[str], NodeView]
    ) -> tuple[int, tuple[Device, ...], HostResources | None] | None:
        """The node as `FgdStates` tells states apart: its kind, its cards and its free CPU and
        memory; None for a node fitted on its own (or not in the index)."""
        kind = self._kind(node, view)
        if kind is None:
            return None
        return kind[0], kind[1], view(node).host

    def _kind(
        self, node: str, view: Callable[[str], NodeView]
    ) -> tuple[int, tuple[Device, ...]] | None:
        """The node's kind (alike nodes share one) and its cards; None for a node fitted on its
        own. Worked out on first need after each change, not on every change: a rebuild
        changes each node many times."""
        found = self._kinds.get(node)
        if found is None:
            if node not in self._summaries:
                return None
            seen = view(node)
            cards = self._cards_of[node]
            if cards[1] < 0:
                found = self._kinds[node] = (-1, seen.devices)
            else:
                load = load_profile(seen.devices, seen.usage, seen.cordoned)
                known = self._kind_ids.get((cards[1], load))
                if known is None:
                    if len(self._kind_ids) > 2 * len(self._summaries) + 1024:  # kinds now unused
                        self._kind_ids.clear()
                        self._models.clear()
                    known = (self._next_kind, self._summaries[node])
                    self._kind_ids[(cards[1], load)] = known
                    self._next_kind += 1
                kind_id, summary = known
                self._summaries[node] = summary  # alike nodes share one (equal) summary
                found = self._kinds[node] = (kind_id, seen.devices)
        return None if found[0] < 0 else found

    def _card_kind(self, devices: tuple[Device, ...]) -> int:
        cards = cards_profile(devices)
        if cards is None:
            return -1
        return self._card_kinds.setdefault(cards, len(self._card_kinds))

    def _shape(self, plan: PodPlan, budget: Budget) -> int:
        """A small number standing for what `fit_pod` reads of the pod (all but its name; its
        CPU only under FGD and FGD-balanced, its memory only under FGD-balanced)."""
        key = (
            plan.containers,
            plan.requests,
            plan.init_count,
            plan.selector,
            plan.policies,
            plan.vendor,
            budget,
            plan.host.cpu if plan.policies.fragmentation else 0,
            plan.host.memory if plan.policies.balanced else 0,
        )
        shape = self._shapes.get(key)
        if shape is None:
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.clear()
                for remembered in self._answers.values():
                    remembered.clear()
                self._models.clear()
                self._refusals.clear()
                self._fgd.clear()
            shape = self._shapes[key] = self._next_shape
            self._next_shape += 1
        return shape
