"""Cost of the victim search (`/preempt`, per node) and of `vgpu explain` on a large cluster.

Victims: one node of 8 cards split 10, full of pods of mixed sizes and priorities; a pod that
needs one or two victims gone, with 8 to 60 candidates. Explain: 1000 nodes of 8 cards, most
of them full, with and without the search for changes and for pods to wait for.

    .venv/bin/python bench/explain_preempt.py
"""

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vgpu.domain import Device, NodeView, SchedulingConfig, Usage, plan_pod, pod_from_manifest
from vgpu.domain.explain import explain
from vgpu.domain.fit import PodPlan
from vgpu.domain.preemption import SEARCH_LIMIT, Victim, choose_victims


def gpu_pod(memory: int, cards: int = 1) -> PodPlan:
    manifest = {
        "metadata": {"name": "urgent", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "resources": {"limits": {"nvidia.com/gpu": cards, "nvidia.com/gpumem": memory}},
                }
            ]
        },
    }
    plan = plan_pod(pod_from_manifest(manifest), SchedulingConfig())
    assert plan is not None
    return plan


def full_node(name: str, rng: random.Random, pods: int) -> tuple[NodeView, list[Victim]]:
    cards = tuple(Device(f"{name}-{i}", i, "NVIDIA A100", 10, 81920) for i in range(8))
    usage: dict[str, Usage] = {}
    victims = []
    for j in range(pods):
        card = cards[j % len(cards)]
        taken = usage.get(card.uuid, Usage())
        memory = min(rng.choice((8000, 10000, 20000, 40000)), card.memory - taken.memory)
        if memory <= 0 or taken.slices >= card.count:
            continue
        grant = Usage(1, memory, 0)
        usage[card.uuid] = taken + grant
        victims.append(
            Victim(f"default/{name}-p{j}", "default", rng.randrange(5), {card.uuid: grant}, grant)
        )
    return NodeView(name, cards, usage), victims


def timed(work: Callable[[], object], repeat: int) -> tuple[float, object]:
    took = []
    result: object = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        took.append(time.perf_counter() - start)
    return statistics.median(took) * 1000, result


def main() -> None:
    rng = random.Random(7)
    print(f"victim search on one node, exact up to {SEARCH_LIMIT} fit checks (median of 20):")
    for pods in (8, 16, 32, 60):
        view, victims = full_node("n", rng, pods)
        for memory, cards in ((60000, 1), (70000, 2)):
            plan = gpu_pod(memory, cards)
            ms, chosen = timed(lambda p=plan, n=view, v=victims: choose_victims(p, 10, n, v), 20)
            count = "none helps" if chosen is None else f"{len(chosen)} victims"  # type: ignore[arg-type]
            pod = f"pod {cards} x {memory} MiB"
            print(f"  {len(victims):3d} candidates, {pod}: {ms:7.2f} ms ({count})")
    nodes = []
    holders = []
    for i in range(1000):
        view, victims = full_node(f"node-{i:04d}", rng, 32)
        nodes.append(view)
        holders += [(view.name, v) for v in victims]
    plan = gpu_pod(75000)
    print("vgpu explain over 1000 full nodes of 8 cards, a pod of 75000 MiB (median of 3):")
    ms, _ = timed(lambda: explain(plan, nodes, suggest=False), 3)
    print(f"  verdicts and groups only:             {ms:8.1f} ms")
    ms, _ = timed(lambda: explain(plan, nodes), 3)
    print(f"  with changes (no running pods given): {ms:8.1f} ms")
    ms, _ = timed(lambda: explain(plan, nodes, holders=holders), 3)
    print(f"  with changes and pods to wait for:    {ms:8.1f} ms")


if __name__ == "__main__":
    main()
