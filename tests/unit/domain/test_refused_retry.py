"""A pod refused everywhere and asked about again (kube-scheduler's retry) is answered from the
last refusal for the nodes unchanged since, and afresh for the nodes that changed."""

from vgpu.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    Ledger,
    NoPlacement,
    Placement,
    PodPlan,
    PodPolicies,
    fit_pod,
)
from vgpu.domain.selectors import CardSelector

NODES = ("a", "b", "c", "d")


def cards(node: str) -> list[Device]:
    return [Device(f"GPU-{node}-{i}", i, "NVIDIA A40", 10, 24000, 100, 0, True) for i in range(2)]


def whole_node() -> PodPlan:
    request = ContainerRequest(2, memory=0, memory_percent=100, cores=100)
    return PodPlan(
        "default/big", "default", ("main",), (request,), 0, CardSelector(), PodPolicies()
    )


def busy_ledger() -> Ledger:
    ledger = Ledger()
    for node in NODES:
        ledger.set_node(node, cards(node))
        ledger.grant(f"default/{node}", node, ((DeviceGrant(f"GPU-{node}-0", "NVIDIA", 1000, 5),),))
    return ledger


def test_a_node_freed_after_the_refusal_takes_the_pod_on_the_retry() -> None:
    ledger = busy_ledger()
    assert isinstance(ledger.decide(whole_node()), NoPlacement)
    ledger.release("default/c")
    retried = ledger.decide(whole_node())
    assert isinstance(retried, Placement) and retried.node == "c"


def test_a_node_that_changed_but_still_refuses_gets_its_new_reason() -> None:
    ledger = busy_ledger()
    first = ledger.decide(whole_node())
    assert isinstance(first, NoPlacement)
    ledger.grant("default/more", "b", ((DeviceGrant("GPU-b-1", "NVIDIA", 1000, 5),),))
    again = ledger.decide(whole_node())
    assert isinstance(again, NoPlacement)
    for node in NODES:
        assert again.rejections[node] == fit_pod(whole_node(), ledger.view(node))
    assert again.rejections["b"] != first.rejections["b"]
    assert again.rejections["a"] == first.rejections["a"]


def test_changing_the_answer_given_does_not_change_the_next_one() -> None:
    ledger = busy_ledger()
    first = ledger.decide(whole_node())
    assert isinstance(first, NoPlacement)
    first.rejections.clear()
    again = ledger.decide(whole_node())
    assert isinstance(again, NoPlacement) and list(again.rejections) == list(NODES)
