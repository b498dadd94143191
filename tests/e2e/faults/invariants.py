"""What must hold after any fault: read from the API, and from the schedulers' `/metrics`.

Capacity: for every card a node registers (`hami.io/node-nvidia-register`), the grants of the
pods holding it, summed with the domain's `pod_footprint`, fit its slices, memory and cores. A
pod *holds* its grant (`hami.io/vgpu-devices-allocated`) while it is neither finished nor being
deleted and is bound to a node (`spec.nodeName`) or reserved on one (`hami.io/vgpu-node`), as a
freshly started scheduler would count it. A bound pod whose grant names another node, or
cards its node does not have, is a violation too: the annotations must agree with the Binding.

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
    Usage,
    decode_node_devices,
    decode_pod_grants,
    pod_from_manifest,
)
from vgpu.domain.grant import pod_footprint
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, NVIDIA

REGISTER = NVIDIA.register_annotation
ALLOCATED = NVIDIA.allocated_annotation
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


def read_cluster(api: ReadsObjects) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every node and every pod (all namespaces), in one go."""
    return api.list_items("/api/v1/nodes"), api.list_items("/api/v1/pods")


def holdings(pods: Iterable[Mapping[str, Any]]) -> tuple[list[Holding], list[Violation]]:
    """The pods that hold cards, and the pods whose grants cannot be read or disagree."""
    held: list[Holding] = []
    problems: list[Violation] = []
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
        allocated = pod.annotations.get(ALLOCATED, "")
        reserved_on = pod.annotations.get(ASSIGNED_NODE_ANNOTATION, "")
        if pod.is_finished or not allocated or not (pod.node_name or reserved_on):
            continue
        if pod.node_name and reserved_on and reserved_on != pod.node_name:
            problems.append(
                Violation(key, f"bound to {pod.node_name} but its grant is for {reserved_on}")
            )
        try:
            grants = decode_pod_grants(allocated)
        except DomainError as exc:
            problems.append(Violation(key, f"unreadable grant {allocated!r}: {exc}"))
            continue
        node = pod.node_name or reserved_on
        held.append(Holding(key, node, pod_footprint(grants, pod.init_count)))
    return held, problems


def check_capacity(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
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
    held, unreadable = holdings(pods)
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


def assert_capacity(api: ReadsObjects) -> None:
    problems = check_capacity(*read_cluster(api))
    assert not problems, "invariant broken:\n" + "\n".join(map(str, problems))


# ledgers ---------------------------------------------------------------------------------------
def ledger_from_api(pods: Iterable[Mapping[str, Any]]) -> Ledger:
    """What a scheduler that has just read the cluster should count, per card."""
    ledger: Ledger = {}
    for holding in holdings(pods)[0]:
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


def ledger_differences(api: ReadsObjects, scrapes: Mapping[str, Callable[[], str]]) -> list[str]:
    """One line per scheduler whose ledger is not the API's (empty when they all agree)."""
    expected = ledger_from_api(read_cluster(api)[1])
    lines = []
    for name, scrape in scrapes.items():
        found = ledger_from_metrics(scrape())
        if found != expected:
            lines.append(f"{name}: {_describe(found)}; the API says {_describe(expected)}")
    return lines


def assert_ledgers_agree(
    api: ReadsObjects, scrapes: Mapping[str, Callable[[], str]], settle: float = 10.0
) -> None:
    """Wait up to `settle` seconds for every scheduler's ledger to equal the API's."""
    deadline = time.monotonic() + settle
    while True:
        differences = ledger_differences(api, scrapes)
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
