import re
from typing import Any

import pytest

from tests.unit.domain.builders import card, container, pod
from vgpu.domain import (
    NVIDIA,
    DeviceGrant,
    DomainError,
    Ledger,
    NoPlacement,
    Placement,
    QuotaBook,
    QuotaLimits,
    Reason,
    SchedulingConfig,
    Usage,
    decide,
    limits_from_hard,
    plan_pod,
)
from vgpu.domain.quota import pod_charge


def book_with(namespace: str = "team", **hard: Any) -> QuotaBook:
    book = QuotaBook()
    book.set_limits(
        namespace, limits_from_hard({f"limits.nvidia.com/{k}": v for k, v in hard.items()}, NVIDIA)
    )
    return book


def schedule(ledger: Ledger, book: QuotaBook, name: str, **limits: Any) -> Placement | NoPlacement:
    plan = plan_pod(pod(container(**limits), name=name, namespace="team"), SchedulingConfig())
    assert plan is not None
    decision = decide(plan, [ledger.view(n) for n in ledger.nodes()], book.budget("team"))
    if isinstance(decision, Placement):
        ledger.grant(plan.key, decision.node, decision.grants)
        book.charge(plan.key, "team", decision.grants, plan.init_count)
    return decision


def test_reads_hami_quota_keys() -> None:
    hard = {
        "limits.nvidia.com/gpumem": "2000",
        "limits.nvidia.com/gpucores": 200,
        "limits.nvidia.com/gpu": "2",
        "requests.nvidia.com/gpumem": "9",
    }
    assert limits_from_hard(hard, NVIDIA) == QuotaLimits(memory=2000, cores=200, cards=2)


def test_bad_quota_quantity_names_the_key() -> None:
    with pytest.raises(DomainError, match=re.escape("limits.nvidia.com/gpumem='lots'")):
        limits_from_hard({"limits.nvidia.com/gpumem": "lots"}, NVIDIA)


def test_usage_is_counted_per_card() -> None:
    ledger = Ledger()
    ledger.set_node("n", [card(f"GPU-{i}", i) for i in range(4)])
    book = book_with(gpumem=4000)
    assert isinstance(schedule(ledger, book, "two-cards", gpu=2, mem=2000), Placement)
    assert book.used("team").memory == 4000
    blocked = schedule(ledger, book, "one-more", gpu=1, mem=1)
    assert isinstance(blocked, NoPlacement)
    assert blocked.rejections["n"].reason is Reason.QUOTA
    assert blocked.rejections["n"].message.endswith("namespace quota left: memory 0 MiB")


def test_percentage_is_charged_as_resolved_on_the_chosen_card() -> None:
    ledger = Ledger()
    ledger.set_node("n", [card("GPU-big", 0, memory=40000), card("GPU-small", 1, memory=10000)])
    book = book_with(gpumem=6000)
    decision = schedule(ledger, book, "half", gpu=1, pct=50)
    assert isinstance(decision, Placement)
    assert decision.grants[0][0].uuid == "GPU-small"
    assert book.used("team").memory == 5000


def test_card_count_limit_is_enforced() -> None:
    ledger = Ledger()
    ledger.set_node("n", [card(f"GPU-{i}", i) for i in range(4)])
    book = book_with(gpu=2)
    assert isinstance(schedule(ledger, book, "a", gpu=2, mem=10), Placement)
    assert isinstance(schedule(ledger, book, "b", gpu=1, mem=10), NoPlacement)


def test_a_limit_of_zero_blocks() -> None:
    ledger = Ledger()
    ledger.set_node("n", [card("GPU-0")])
    assert isinstance(
        schedule(ledger, book_with(gpucores=0), "a", gpu=1, mem=10, cores=0), NoPlacement
    )


def test_refund_frees_quota_and_is_idempotent() -> None:
    ledger = Ledger()
    ledger.set_node("n", [card("GPU-0"), card("GPU-1", 1)])
    book = book_with(gpumem=1000)
    assert isinstance(schedule(ledger, book, "a", gpu=1, mem=1000), Placement)
    book.refund("team/a")
    book.refund("team/a")
    assert book.used("team").memory == 0
    assert isinstance(schedule(ledger, book, "b", gpu=1, mem=1000), Placement)


def test_other_namespaces_are_unlimited() -> None:
    assert book_with(gpumem=0).budget("other").allows(Usage(5, 5, 5))


def test_init_container_charge_is_the_larger_phase() -> None:
    init = (DeviceGrant("GPU-0", "NVIDIA", 3000, 0),)
    app = (DeviceGrant("GPU-0", "NVIDIA", 1000, 0), DeviceGrant("GPU-1", "NVIDIA", 1000, 0))
    assert pod_charge((init, app), init_count=1).memory == 3000
    assert pod_charge((init, app), init_count=0).memory == 5000
