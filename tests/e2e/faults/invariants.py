"""What must hold after any fault: read from the API, and from the schedulers' `/metrics`.

Capacity: for every card a node registers (`hami.io/node-nvidia-register`), the grants of the
pods holding it, summed with the domain's `pod_footprint`, fit its slices, memory and cores. A
pod *holds* its grant (`hami.io/vgpu-devices-allocated`) while it is neither finished nor being
deleted and is reserved on a node (`hami.io/vgpu-node`, unbound), or is bound to a node
(`spec.nodeName`) and asks for `nvidia.com/gpu`. A bound pod whose grant names another node, or
cards its node does not have, is a violation too: the annotations must agree with the Binding.

Tenants can edit their pods' annotations. With a `Witness`, the checker remembers the grant it
first saw on each bound pod (HAMi's unsigned ones included) and counts that one until the pod
ends, whatever the pod says later: what the pod really holds. Without one, it reads every
pod's annotations as they are.

Ledgers agree: the per-card allocation a scheduler publishes (`hami_gpu_memory_allocated_bytes`,
`hami_gpu_core_allocated_ratio`, `hami_gpu_shared_count`) equals what the API says, for the
leader, a standby and a freshly started process alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families

from vgpu.domain import (
    DomainError,
    Pod,
    Usage,
    decode_node_devices,
    decode_pod_grants,
    pod_from_manifest,
)
from vgpu.domain.grant import pod_footprint
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, NVIDIA

REGISTER = NVIDIA.register_annotation
ALLOCATED = NVIDIA.allocated_annotation
COUNT = NVIDIA.count_resource
MIB = 1 << 20
Ledger = dict[str, Usage]  # card uuid -> what is granted of it (idle cards left out)


class ReadsObjects(Protocol):
    """What the checker needs of the API emulator (`RunningApiServer` has it)."""

    def list_items(self, collection: str) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which card (or pod), what is wrong, and the pods involved."""

    subject: str
    problem: str
    pods: tuple[str, ...] = ()

    def __str__(self) -> str:
        held = f" (pods: {', '.join(self.pods)})" if self.pods else ""
        return f"{self.subject}: {self.problem}{held}"


@dataclass
class _Card:
    node: str
    count: int
    memory: int
    cores: int
    used: Usage = field(default_factory=Usage)
    pods: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Holding:
    """A pod's hold on cards as the API shows it."""

    pod: str
    node: str
    footprint: dict[str, Usage]


class Witness:
    """The grant first seen on each bound pod (by uid), kept until the pod ends or is gone."""

    def __init__(self) -> None:
        self._first: dict[str, Holding] = {}

    def seen(self, uid: str, fresh: Holding | None) -> Holding | None:
        """What the bound pod `uid` holds: the first holding seen for it, else `fresh`."""
        if uid not in self._first and fresh is not None:
            self._first[uid] = fresh
        return self._first.get(uid, fresh)

    def keep_only(self, live: set[str]) -> None:
        """Forget the pods that ended or are gone."""
        for uid in set(self._first) - live:
            del self._first[uid]


def read_cluster(api: ReadsObjects) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every node and every pod (all namespaces), in one go."""
    return api.list_items("/api/v1/nodes"), api.list_items("/api/v1/pods")


def holdings(
    pods: Iterable[Mapping[str, Any]], witness: Witness | None = None
) -> tuple[list[Holding], list[Violation]]:
    """The pods that hold cards, and the pods whose grants cannot be read or disagree."""
    held: list[Holding] = []
    problems: list[Violation] = []
    live: set[str] = set()
    for manifest in pods:
        meta = manifest.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if meta.get("deletionTimestamp"):
            continue
        try:
            pod = pod_from_manifest(manifest)
        except DomainError as exc:
            problems.append(Violation(key, f"unreadable pod: {exc}"))
            continue
        if pod.is_finished:
            continue
        live.add(pod.uid)
        fresh = _holding(pod, key, problems)
        if pod.node_name and pod.uid and witness is not None:
            fresh = witness.seen(pod.uid, fresh)
        if fresh is not None:
            held.append(fresh)
    if witness is not None:
        witness.keep_only(live)
    return held, problems


def _holding(pod: Pod, key: str, problems: list[Violation]) -> Holding | None:
    """What the pod's annotations say it holds now (None: nothing), adding what is wrong."""
    allocated = pod.annotations.get(ALLOCATED, "")
    reserved_on = pod.annotations.get(ASSIGNED_NODE_ANNOTATION, "")
    if not allocated or not (pod.node_name or reserved_on):
        return None
    if pod.node_name and not _asks_for_cards(pod):
        return None  # a forged grant on a pod without GPUs holds nothing
    if pod.node_name and reserved_on and reserved_on != pod.node_name:
        problems.append(
            Violation(key, f"bound to {pod.node_name} but its grant is for {reserved_on}")
        )
    try:
        grants = decode_pod_grants(allocated)
    except DomainError as exc:
        problems.append(Violation(key, f"unreadable grant {allocated!r}: {exc}"))
        return None
    node = pod.node_name or reserved_on
    return Holding(key, node, pod_footprint(grants, pod.init_count))


def _asks_for_cards(pod: Pod) -> bool:
    return any(
        str(c.limits.get(COUNT, "0")) not in ("0", "") for c in pod.containers
    )


def check_capacity(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    witness: Witness | None = None,
) -> list[Violation]:
    """Every way the API's objects over-commit a card or disagree with a Binding."""
    cards: dict[str, _Card] = {}
    problems: list[Violation] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(REGISTER)
        if text is None:
            continue
        try:
            devices = decode_node_devices(text)
        except DomainError:
            continue  # a node the scheduler cannot use holds nothing
        for device in devices:
            cards[device.uuid] = _Card(meta["name"], device.count, device.memory, device.cores)
    held, unreadable = holdings(pods, witness)
    problems.extend(unreadable)
    for holding in held:
        for uuid, usage in holding.footprint.items():
            card = cards.get(uuid)
            if card is None:
                problems.append(Violation(holding.pod, f"holds card {uuid}, which no node has"))
                continue
            if card.node != holding.node:
                problems.append(
                    Violation(
                        holding.pod, f"on {holding.node} but holds {uuid} of node {card.node}"
                    )
                )
            card.used = card.used + usage
            card.pods.append(holding.pod)
    for uuid, card in sorted(cards.items()):
        used = card.used
        over = [
            f"{what} {have} of {limit}"
            for what, have, limit in (
                ("slices", used.slices, card.count),
                ("MiB", used.memory, card.memory),
                ("cores", used.cores, card.cores),
            )
            if have > limit
        ]
        if over:
            problems.append(
                Violation(
                    f"card {uuid} on {card.node}",
                    "over capacity: " + ", ".join(over),
                    tuple(card.pods),
                )
            )
    return problems


def assert_capacity(api: ReadsObjects, witness: Witness | None = None) -> None:
    problems = check_capacity(*read_cluster(api), witness)
    assert not problems, "invariant broken:\n" + "\n".join(map(str, problems))


# ledgers ---------------------------------------------------------------------------------------
def ledger_from_api(pods: Iterable[Mapping[str, Any]], witness: Witness | None = None) -> Ledger:
    """What a scheduler that has just read the cluster should count, per card."""
    ledger: Ledger = {}
    for holding in holdings(pods, witness)[0]:
        for uuid, usage in holding.footprint.items():
            ledger[uuid] = ledger.get(uuid, Usage()) + usage
    return {uuid: usage for uuid, usage in ledger.items() if not usage.is_idle}


def ledger_from_metrics(text: str) -> Ledger:
    """The per-card allocation a scheduler's `/metrics` page states."""
    slices: dict[str, float] = {}
    memory: dict[str, float] = {}
    cores: dict[str, float] = {}
    series = {
        "hami_gpu_shared_count": slices,
        "hami_gpu_memory_allocated_bytes": memory,
        "hami_gpu_core_allocated_ratio": cores,
    }
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            target = series.get(sample.name)
            if target is not None:
                uuid = sample.labels["device_uuid"]
                target[uuid] = target.get(uuid, 0.0) + sample.value
    ledger: Ledger = {}
    for uuid in set(slices) | set(memory) | set(cores):
        usage = Usage(
            slices=int(slices.get(uuid, 0)),
            memory=int(memory.get(uuid, 0) // MIB),
            cores=int(cores.get(uuid, 0)),
        )
        if not usage.is_idle:
            ledger[uuid] = usage
    return ledger


def ledger_differences(
    api: ReadsObjects,
    scrapes: Mapping[str, Callable[[], str]],
    witness: Witness | None = None,
) -> list[str]:
    """One line per scheduler whose ledger is not the API's (empty when they all agree)."""
    expected = ledger_from_api(read_cluster(api)[1], witness)
    lines = []
    for name, scrape in scrapes.items():
        found = ledger_from_metrics(scrape())
        if found != expected:
            lines.append(f"{name}: {_describe(found)}; the API says {_describe(expected)}")
    return lines


def assert_ledgers_agree(
    api: ReadsObjects,
    scrapes: Mapping[str, Callable[[], str]],
    settle: float = 10.0,
    witness: Witness | None = None,
) -> None:
    """Wait up to `settle` seconds for every scheduler's ledger to equal the API's."""
    deadline = time.monotonic() + settle
    while True:
        differences = ledger_differences(api, scrapes, witness)
        if not differences or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not differences, "ledgers disagree:\n" + "\n".join(differences)


def _describe(ledger: Ledger) -> str:
    if not ledger:
        return "nothing granted"
    return ", ".join(
        f"{uuid}={u.slices} slices/{u.memory} MiB/{u.cores} cores"
        for uuid, u in sorted(ledger.items())
    )
