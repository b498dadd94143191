"""Tiny scenarios and hand-made pods for simulator tests."""

from typing import Any

from vgpu.app.simulate.scenario import Scenario, parse_scenario
from vgpu.app.simulate.workload import PodArrival

TINY = """
name: tiny
seed: 3
duration: 6h
sample_every: 10m
nodes:
  - {name: n, count: 3, gpus: 2, memory: 40Gi, split_count: 4}
namespaces:
  - name: team
    quota: {gpumem: 40Gi}
workloads:
  - name: small
    namespace: team
    arrivals_per_hour: 8
    memory: {min: 4Gi, max: 12Gi}
    cores: {min: 10, max: 30}
    runtime: {distribution: exponential, mean: 1h}
  - name: big
    arrivals_per_hour: 1.5
    gpus: {choices: [1, 2]}
    runtime: {distribution: fixed, value: 2h}
"""


def tiny() -> Scenario:
    return parse_scenario(TINY, "tiny")


def cluster(gpus: int = 1, nodes: int = 1, duration: str = "4h", extra: str = "") -> Scenario:
    """`nodes` nodes with `gpus` 40 GiB cards each; its workload is replaced by hand-made pods."""
    return parse_scenario(
        f"""
duration: {duration}
sample_every: 10m
nodes: [{{name: n, count: {nodes}, gpus: {gpus}, memory: 40Gi, split_count: 4}}]
workloads:
  - {{name: unused, arrivals_per_hour: 1, runtime: {{distribution: fixed, value: 1h}}}}
{extra}
""",
        "test",
    )


def arrival(
    name: str,
    at: float,
    runtime: float,
    *,
    namespace: str = "default",
    priority: int = 0,
    **limits: Any,
) -> PodArrival:
    """A pod created at `at` seconds asking for `gpu=`, `gpumem=`, `gpucores=` (HAMi names)."""
    resources = {f"nvidia.com/{k.replace('_', '-')}": str(v) for k, v in limits.items()}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"limits": resources}}]}
    if priority:
        spec["priority"] = priority
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": {}},
        "spec": spec,
    }
    return PodArrival(time=at, runtime=runtime, workload="hand", manifest=manifest)


CONTENDED = """
name: contended
duration: 12h
sample_every: 15m
nodes:
  - {name: n, count: 2, gpus: 2, memory: 40Gi, split_count: 4}
namespaces:
  - name: team
    quota: {gpumem: 50Gi, gpucores: 150}
workloads:
  - name: small
    namespace: team
    arrivals_per_hour: 10
    memory: {min: 6Gi, max: 16Gi}
    cores: {min: 10, max: 40}
    runtime: {distribution: exponential, mean: 1h}
  - name: big
    arrivals_per_hour: 2
    gpus: {choices: [1, 2]}
    runtime: {distribution: lognormal, median: 1h, sigma: 0.5}
"""


def contended() -> Scenario:
    """Capacity and quota both bind: pods wait for cards, then compete for the budget."""
    return parse_scenario(CONTENDED, "contended")
