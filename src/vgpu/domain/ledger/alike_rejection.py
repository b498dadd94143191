"""Nodes alike card for card share one computed rejection.

Two nodes whose cards match position by position in everything `fit_pod` reads of them but
their ids (type, index, split, memory, cores, NUMA node, health, mode, cordon, usage) turn a pod
down for the same reason, with the same message and the same reason per card: only the node's
name and its card ids differ. So a pod that fits nowhere costs one exact fit per *kind* of node
(idle nodes, nodes loaded alike) instead of one per node; the other nodes' rejections are copies
that fill in their own card ids only when someone reads their cards.

A pod whose fit reads card ids (UUID selectors) or the pair scores (`topology-aware`) is
always fitted node by node, and so is a node with MIG cards or repeated card indexes.
"""

from collections.abc import Mapping
from typing import Any

from vgpu.domain.device import HAMI_CORE_MODE, IDLE, Device, Usage
from vgpu.domain.fit import PodPlan
from vgpu.domain.reasons import CardRejection, NodeRejection

Cards = tuple[tuple[object, ...], ...]
Load = tuple[object, ...]


def cards_profile(devices: tuple[Device, ...]) -> Cards | None:
    """What `fit_pod` reads of the node's cards themselves, less their ids; None when the node
    must be fitted on its own."""
    rows = []
    for device in devices:
        if device.mode != HAMI_CORE_MODE or device.mig_profiles:
            return None
        rows.append(
            (
                device.index,
                device.type,
                device.count,
                device.memory,
                device.cores,
                device.numa,
                device.healthy,
                device.mode,
            )
        )
    if len({device.index for device in devices}) != len(devices):
        return None  # cards of one index are ordered by id
    return tuple(rows)


def load_profile(
    devices: tuple[Device, ...], usage: Mapping[str, Usage], cordoned: frozenset[str]
) -> Load:
    """What `fit_pod` reads of the node's cards' state: cordon and usage, card by card."""
    if not usage and not cordoned:
        return ()
    flat: list[object] = []
    for device in devices:
        used = usage.get(device.uuid, IDLE)
        flat += (device.uuid in cordoned, used.slices, used.memory, used.cores)
    return tuple(flat)


def groupable(plan: PodPlan) -> bool:
    """True when the pod's fit on a node reads nothing of its card ids."""
    selector = plan.selector
    return not (plan.policies.topology or selector.use_uuids or selector.avoid_uuids)


class Model:
    """A rejection fitted on one node, to copy to the nodes alike to it. Where its cards sit
    among the node's cards, and HAMi's reason counts, are worked out on the first copy: in a
    varied cluster most nodes have no twin, and those must cost no more than the fit."""

    __slots__ = ("_hami_reason", "_line", "_positions", "devices", "rejection")

    def __init__(self, rejection: NodeRejection, devices: tuple[Device, ...]) -> None:
        self.rejection = rejection
        self.devices = devices
        self._positions: tuple[int, ...] | None = None
        self._hami_reason: str | None = None
        self._line: str | None = None

    @property
    def positions(self) -> tuple[int, ...]:
        """Of each rejected card, among the node's cards (`fit_pod` rejects only those)."""
        if self._positions is None:
            where = {device.uuid: position for position, device in enumerate(self.devices)}
            self._positions = tuple(where[card.uuid] for card in self.rejection.cards)
        return self._positions

    @property
    def hami_reason(self) -> str:
        if self._hami_reason is None:
            self._hami_reason = self.rejection.hami_reason
        return self._hami_reason

    @property
    def line(self) -> str:
        if self._line is None:
            self._line = self.rejection.line
        return self._line


class AlikeRejection(NodeRejection):
    """Another node's rejection made from a `Model`: the same reason, message and per-card
    reasons, its own name, and its own card ids filled in when `cards` is first read. It
    compares and hashes as the `NodeRejection` that `fit_pod` gives for that node."""

    __slots__ = ("_devices", "_model")

    @classmethod
    def like(cls, node: str, model: Model, devices: tuple[Device, ...]) -> "AlikeRejection":
        made = _new(cls)
        _set_node(made, node)
        _set_reason(made, model.rejection.reason)
        _set_message(made, model.rejection.message)
        _set_considered(made, model.rejection.considered)
        _set_taken(made, model.rejection.taken)
        _set_model(made, model)
        _set_devices(made, devices)
        return made

    def __getattr__(self, name: str) -> Any:  # only for slots not set yet
        if name != "cards":
            raise AttributeError(name)
        model: Model = object.__getattribute__(self, "_model")
        devices: tuple[Device, ...] = object.__getattribute__(self, "_devices")
        cards = tuple(
            CardRejection(devices[position].uuid, card.reason, card.need, card.free)
            for position, card in zip(model.positions, model.rejection.cards, strict=True)
        )
        object.__setattr__(self, "cards", cards)
        return cards

    @property
    def hami_reason(self) -> str:
        model: Model | None = getattr(self, "_model", None)  # None when built field by field
        return super().hami_reason if model is None else model.hami_reason

    @property
    def line(self) -> str:
        try:
            model: Model = self._model
        except AttributeError:  # built field by field
            return super().line
        return model.line

    def _fields(self) -> tuple[object, ...]:
        return (self.node, self.reason, self.message, self.cards, self.considered, self.taken)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeRejection):
            return NotImplemented
        return self._fields() == (
            other.node,
            other.reason,
            other.message,
            other.cards,
            other.considered,
            other.taken,
        )

    def __hash__(self) -> int:
        return hash(self._fields())


# A pod that fits nowhere among thousands of alike nodes gets thousands of copies: the slots'
# own setters (what object.__setattr__ looks up each time), bound once, make them a third cheaper.
_new = object.__new__
_set_node = NodeRejection.__dict__["node"].__set__
_set_reason = NodeRejection.__dict__["reason"].__set__
_set_message = NodeRejection.__dict__["message"].__set__
_set_considered = NodeRejection.__dict__["considered"].__set__
_set_taken = NodeRejection.__dict__["taken"].__set__
_set_model = AlikeRejection.__dict__["_model"].__set__
_set_devices = AlikeRejection.__dict__["_devices"].__set__
