"""Seeded rounds of concurrent filter/bind with random API faults, checked after every round.

One round: a few pods ask for random slices of the cluster's cards; kube-scheduler's cycle
(filter, then bind where it said) runs for all of them at once against one scheduler, while
the scheduler's proxy injects up to two faults drawn from `FAULTS`. With faults on, a tenant
may also edit one of its bound pods first (`TENANT_EDITS`, one round in three): garble its
signature, mark it `bind-phase: failed` or remove its grant, as a cluster without the
admission policy allows. Then the faults are cleared and the invariants are checked, with a
`Witness` that remembers what each bound pod was first seen holding: no card over capacity,
and the scheduler's ledger equal to what the pods hold. Some pods are then deleted (their work
done), the others stay and keep holding their cards into later rounds. The same seed replays
the same rounds.

Used by `test_random_rounds.py` (a few hundred rounds) and `scripts/soak.py` (minutes).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.faults.cluster import FaultCluster, Replica, pods_path
from tests.e2e.faults.invariants import (
    Witness,
    check_capacity,
    ledger_differences,
    read_cluster,
)
from tests.e2e.faults.proxy import Action, Rule
from tests.e2e.scheduler.harness import wait_until

POD_WRITE = r"/namespaces/default/pods/[^/?]+(\?|$)"
BINDING = r"/pods/[^/]+/binding"
NODE_WRITE = r"/api/v1/nodes/[^/?]+(\?|$)"
# pods spread over nodes, so that concurrent binds do not all queue for one node's lock
SPREAD = {"VGPU_NODE_POLICY": "spread"}


def _fault(
    action: Action, method: str, path: str, **options: Any
) -> Callable[[random.Random], Rule]:
    def make(rng: random.Random) -> Rule:
        seconds = rng.uniform(0.05, 0.4) if action is Action.DELAY else 0.0
        return Rule(action, method, path, times=1, seconds=seconds, **options)

    return make


FAULTS: dict[str, Callable[[random.Random], Rule]] = {
    "pod PATCH delayed": _fault(Action.DELAY, "PATCH", POD_WRITE),
    "pod PATCH lost": _fault(Action.CUT_BEFORE, "PATCH", POD_WRITE),
    "pod PATCH answer lost": _fault(Action.CUT_AFTER, "PATCH", POD_WRITE),
    "pod PATCH 409": _fault(Action.RESPOND, "PATCH", POD_WRITE, status=409),
    "pod PATCH 500": _fault(Action.RESPOND, "PATCH", POD_WRITE, status=500),
    "Binding delayed": _fault(Action.DELAY, "POST", BINDING),
    "Binding lost": _fault(Action.CUT_BEFORE, "POST", BINDING),
    "Binding answer lost": _fault(Action.CUT_AFTER, "POST", BINDING),
    "Binding 500": _fault(Action.RESPOND, "POST", BINDING, status=500),
    "node lock PATCH 500": _fault(Action.RESPOND, "PATCH", NODE_WRITE, status=500),
    "node lock answer lost": _fault(Action.CUT_AFTER, "PATCH", NODE_WRITE),
}


TENANT_EDITS: dict[str, dict[str, str | None]] = {
    "signature garbled": {"vgpu.io/grant-signature": "k20260101t0000:garbled"},
    "bind-phase failed": {"hami.io/bind-phase": "failed"},
    "grant removed": {"hami.io/vgpu-devices-allocated": None},
}
TENANT_EDIT_CHANCE = 1 / 3  # per round, with faults on


@dataclass
class Figures:
    """What a run did; `violations` holds the broken rounds' findings, if any."""

    rounds: int = 0
    pods: int = 0
    placed: int = 0
    bound: int = 0
    filters: int = 0
    faults_injected: int = 0
    tenant_edits: int = 0
    seconds: float = 0.0
    broken_rounds: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def filters_per_second(self) -> float:
        return self.filters / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        return (
            f"{self.rounds} rounds, {self.pods} pods, {self.filters} filters "
            f"({self.filters_per_second:.1f}/s), {self.placed} placed, {self.bound} bound, "
            f"{self.faults_injected} faults injected, {self.tenant_edits} tenant edits, "
            f"{self.broken_rounds} rounds with violations, in {self.seconds:.1f} s"
        )


class RandomRounds:
    """Runs rounds against one long-lived replica of `cluster` (see the module doc)."""

    def __init__(
        self,
        cluster: FaultCluster,
        replica: Replica,
        seed: int,
        concurrency: int = 4,
        faults: bool = True,
        keep: float = 0.5,
        after_bind: Callable[[str], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.replica = replica
        self.seed = seed
        self.concurrency = concurrency
        self.faults = faults
        self.keep = keep  # chance, each round, that a placed pod stays on (holding its cards)
        self.after_bind = after_bind  # called with the node after each successful bind
        self.figures = Figures()
        self.witness = Witness()
        self._kept: list[str] = []  # pods of earlier rounds that still hold their cards
        self._pool = ThreadPoolExecutor(max_workers=concurrency)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def run(
        self, rounds: int | None = None, seconds: float | None = None, keep_going: bool = False
    ) -> Figures:
        """Run until `rounds` are done or `seconds` have passed, and stop at the first round
        that breaks an invariant unless `keep_going` (then its pods are deleted and the run
        goes on from a clean slate; `violations` collects every finding)."""
        started = time.monotonic()
        index = 0
        while (rounds is None or index < rounds) and (
            seconds is None or time.monotonic() - started < seconds
        ):
            problems = self.run_round(index)
            index += 1
            self.figures.seconds = time.monotonic() - started
            if problems:
                self.figures.violations += problems
                self.figures.broken_rounds += 1
                if not keep_going:
                    break
                self.clean_slate()
        return self.figures

    def clean_slate(self) -> None:
        """Delete every pod, so that one broken round does not break all the next ones."""
        for pod in self.cluster.api.list_items(pods_path()):
            self.cluster.api.delete(f"{pods_path()}/{pod['metadata']['name']}")
        self._kept = []
        wait_until(lambda: not self.check(settle=0.0), 10)

    def run_round(self, index: int) -> list[str]:
        rng = random.Random(f"{self.seed}/{index}")
        proxy = self.replica.proxy
        chosen = rng.sample(sorted(FAULTS), rng.randint(0, 2)) if self.faults else []
        for name in chosen:
            proxy.add(FAULTS[name](rng))
        if self.faults and rng.random() < TENANT_EDIT_CHANCE:
            chosen += self._tenant_edit(rng)
        before = proxy.faults()
        pods = [
            self.cluster.create_pod(
                f"r{index}-{i}",
                memory=rng.choice((1000, 2500, 4000, 6000)),
                cores=rng.choice((0, 10, 30, 50)),
            )
            for i in range(self.concurrency)
        ]
        results = list(self._pool.map(self._cycle, pods))
        proxy.clear()
        figures = self.figures
        figures.rounds += 1
        figures.pods += len(pods)
        figures.filters += len(pods)
        figures.placed += sum(1 for r in results if r != "unplaced")
        figures.bound += sum(1 for r in results if r == "bound")
        figures.faults_injected += proxy.faults() - before
        problems = self.check()
        if problems:
            faults = ", ".join(chosen) or "none"
            return [f"round {index} (seed {self.seed}, faults: {faults}):", *problems]
        self._retire(pods, results, rng)
        return []

    def _retire(self, pods: list[dict[str, Any]], results: list[str], rng: random.Random) -> None:
        """Delete the pods whose work is done (each placed pod stays with chance `keep`, round
        after round) and the unplaced ones (kube-scheduler's retries are not modelled)."""
        names = [p["metadata"]["name"] for p in pods]
        placed = [n for n, r in zip(names, results, strict=True) if r != "unplaced"]
        gone = [n for n, r in zip(names, results, strict=True) if r == "unplaced"]
        staying: list[str] = []
        for name in self._kept + placed:
            (staying if rng.random() < self.keep else gone).append(name)
        for name in gone:
            self.cluster.api.delete(f"{pods_path()}/{name}")
        self._kept = staying

    def _tenant_edit(self, rng: random.Random) -> list[str]:
        """A tenant edits one of the bound pods kept from earlier rounds; names what it did."""
        api = self.cluster.api
        bound = [
            name
            for name in self._kept
            if ((api.get(f"{pods_path()}/{name}") or {}).get("spec") or {}).get("nodeName")
        ]
        if not bound:
            return []
        name, edit = rng.choice(bound), rng.choice(sorted(TENANT_EDITS))
        api.merge_patch(
            f"{pods_path()}/{name}", {"metadata": {"annotations": TENANT_EDITS[edit]}}
        )
        self.figures.tenant_edits += 1
        return [f"tenant: {edit} on {name}"]

    def check(self, settle: float = 5.0) -> list[str]:
        """Capacity in the API, then the replica's ledger against the API's (after settling),
        both as the witness says the pods hold their cards."""
        api, witness = self.cluster.api, self.witness
        problems = [str(v) for v in check_capacity(*read_cluster(api), witness)]
        if problems:
            return problems
        scrapes = self.cluster.scrapes(self.replica)
        differences: list[str] = []

        def agree() -> bool:
            differences[:] = ledger_differences(api, scrapes, witness)
            return not differences

        wait_until(agree, settle)
        return differences

    def _cycle(self, pod: dict[str, Any]) -> str:
        process = self.replica.process
        nodes = self.cluster.nodes
        reply = process.try_filter(pod, nodes, timeout=10)
        chosen = (reply or {}).get("NodeNames") or []
        if len(chosen) != 1:
            return "unplaced"
        if process.try_bind(pod, chosen[0], timeout=10) != "":
            return "placed"
        if self.after_bind is not None:
            self.after_bind(chosen[0])
        return "bound"
