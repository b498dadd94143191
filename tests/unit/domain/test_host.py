"""Node CPU and host memory, and what pods ask of them, as kube-scheduler counts them; the
ledger's count of them per node (what FGD weighs)."""

import pytest

from vgpu.domain import Device, Ledger, PodPolicies, Policy, SchedulingConfig, plan_pod
from vgpu.domain.errors import DomainError, RequestError
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload
from vgpu.domain.host import HostResources, milli_cores, node_allocatable, pod_host_request
from vgpu.domain.initrelease import InitProgress
from vgpu.domain.pod import Container, Pod


def pod_of(*containers: Container, sidecars: frozenset[int] = frozenset()) -> Pod:
    inits = sum(1 for c in containers if c.is_init)
    return Pod("ns", "p", containers=containers, init_status=InitProgress(inits, False, sidecars))


def test_a_pods_request_is_its_app_containers_sum_or_its_largest_init_container() -> None:
    app = [
        Container("a", requests={"cpu": "500m", "memory": "1Gi"}),
        Container("b", limits={"cpu": "1", "memory": "512Mi"}),  # limits where no requests
    ]
    init = Container("setup", requests={"cpu": "4", "memory": "100Mi"}, is_init=True)
    assert pod_host_request(pod_of(*app)) == HostResources(1500, 1536)
    assert pod_host_request(pod_of(init, *app)) == HostResources(4000, 1536)


def test_sidecars_run_beside_the_app_and_the_init_containers_after_them() -> None:
    sidecar = Container("proxy", requests={"cpu": "1", "memory": "64Mi"}, is_init=True)
    setup = Container("setup", requests={"cpu": "2", "memory": "64Mi"}, is_init=True)
    app = Container("main", requests={"cpu": "250m", "memory": "1Mi"})
    asked = pod_host_request(pod_of(sidecar, setup, app, sidecars=frozenset({0})))
    assert asked == HostResources(3000, 128)  # setup runs beside the sidecar: 3 CPUs


def test_requests_round_up_to_a_milli_core_and_a_mib() -> None:
    tiny = Container("main", requests={"cpu": "0.0001", "memory": "1048577"})
    assert pod_host_request(pod_of(tiny)) == HostResources(1, 2)
    assert milli_cores("3152m") == 3152 and milli_cores(0.5) == 500


@pytest.mark.parametrize("value", ["lots", "-1", "1e40"])
def test_a_bad_request_is_refused_naming_the_container_and_resource(value: str) -> None:
    bad = Container("main", requests={"cpu": value})
    with pytest.raises(RequestError, match=r"container 'main': cpu="):
        pod_host_request(pod_of(bad))
    with pytest.raises(ValueError):
        milli_cores(True)


def test_a_nodes_allocatable_reads_its_cpu_and_memory() -> None:
    allocatable = {"cpu": "95500m", "memory": "393216Mi", "pods": "110"}
    assert node_allocatable(allocatable) == HostResources(95500, 393216)
    assert node_allocatable({"pods": "110"}) is None
    with pytest.raises(DomainError, match=r"status.allocatable.memory='many'"):
        node_allocatable({"cpu": "8", "memory": "many"})


def card(node: str) -> Device:
    return Device(f"GPU-{node}", 0, "NVIDIA T4", count=20, memory=15360, cores=100)


def test_the_ledger_counts_bound_pods_and_reservations_against_the_allocatable() -> None:
    ledger = Ledger()
    ledger.set_node("a", [card("a")])
    assert ledger.view("a").host is None  # allocatable not known
    ledger.set_host("a", HostResources(8000, 32768))
    ledger.charge_host("web", "a", HostResources(1000, 1024), bound=True)
    ledger.charge_host("gpu", "a", HostResources(2000, 2048))  # a reservation
    assert ledger.view("a").host == HostResources(5000, 29696)
    assert ledger.view("a", exclude_pod="gpu").host == HostResources(7000, 31744)
    ledger.release_host("web", unbound_only=True)  # a bound pod's charge stays
    ledger.release_host("gpu", unbound_only=True)
    assert ledger.view("a").host == HostResources(7000, 31744)
    ledger.charge_host("web", "a", HostResources(1000, 1024), bound=True)  # the same again
    ledger.release_host("web")
    assert ledger.view("a").host == HostResources(8000, 32768)


def test_fgd_turns_to_another_node_once_a_nodes_cpu_would_strand_its_gpu() -> None:
    # pods of the typical shape take half a card and 8 CPUs; node a has 10 CPUs, b 100
    shape = CardShape(1, memory_percent=50, cores=50, cpu=8000)
    workload = CardWorkload([(shape, 1)])
    config = SchedulingConfig(
        policies=PodPolicies(node=Policy.FGD, gpu=Policy.FGD), recent_shapes=lambda: workload
    )
    ledger = Ledger()
    for node, cpu in (("a", 10_000), ("b", 100_000)):
        ledger.set_node(node, [card(node)])
        ledger.set_host(node, HostResources(cpu, 65536))
    half = {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 50}
    small = Container("main", limits=half, requests={"cpu": "1"})
    plan = plan_pod(Pod("ns", "p", containers=(small,)), config)
    assert plan is not None
    # 1 CPU leaves a 9 of 10: the other half card still takes the shape; a wins by name
    assert ledger.decide(plan).node == "a"  # type: ignore[union-attr]
    ledger.charge_host("web", "a", HostResources(1500, 0), bound=True)
    # now a keeps 7.5 CPUs after the pod, too few for the shape: its half card would be
    # stranded, so b, remembered answers notwithstanding
    assert ledger.decide(plan).node == "b"  # type: ignore[union-attr]
