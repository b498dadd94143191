"""The domain's explanation: grouping, the closest card, and the changes that would place a pod."""

from typing import Any

from tests.unit.domain.builders import card, container, mig_card, pod
from vgpu.domain import NodeView, SchedulingConfig, Usage, plan_pod
from vgpu.domain.explain import explain
from vgpu.domain.fit import PodPlan
from vgpu.domain.preemption import Victim
from vgpu.domain.quota import Budget

CONFIG = SchedulingConfig()


def plan(annotations: dict[str, str] | None = None, **limits: Any) -> PodPlan:
    result = plan_pod(pod(container(**limits), name="p", annotations=annotations), CONFIG)
    assert result is not None
    return result


def node(name: str, used: int = 0, memory: int = 24000, cores_used: int = 0, **kw: Any) -> NodeView:
    uuid = f"GPU-{name}"
    usage = {uuid: Usage(1, used, cores_used)} if used or cores_used else {}
    return NodeView(name, (card(uuid, memory=memory, **kw),), usage)


def test_a_thousand_nodes_read_as_a_few_lines() -> None:
    nodes = [node(f"n{i:04d}", used=20000 + i % 7) for i in range(1000)]
    nodes += [node(f"t{i}", type="NVIDIA T4") for i in range(3)]
    wants_a40 = plan({"nvidia.com/use-gputype": "A40"}, gpu=1, mem=8000)
    lines = explain(wants_a40, nodes, suggest=False).lines()
    assert lines[0] == (
        "pod default/p: fits on 0/1003 nodes: 1000 insufficient memory, 3 type mismatch"
    )
    assert len(lines) == 6
    assert (
        "  1000 nodes, insufficient memory: n0000, n0001, n0002, n0003, n0004 and 995 more" in lines
    )
    # The closest is a node with the most memory left: 4000 MiB, 4000 short.
    assert any(
        "closest: n0000:" in line and "4000 MiB free, 4000 MiB short" in line for line in lines
    )


def test_a_fitting_pod_shows_what_it_would_get() -> None:
    report = explain(plan(gpu=1, mem=8000, cores=30), [node("a", used=20000), node("b")])
    assert report.fits and report.placement is not None
    assert report.lines()[:2] == [
        "pod default/p: fits on 1/2 nodes; the scheduler would choose b",
        "  would get: node b, cards GPU-b 8000 MiB 30% cores",
    ]
    assert report.suggestions == ()


def test_fewer_cores_is_suggested_with_the_largest_amount_that_fits() -> None:
    nodes = [node("a", cores_used=70), node("b", cores_used=55)]
    report = explain(plan(gpu=1, mem=1000, cores=60), nodes)
    changes = {s.change: s for s in report.suggestions}
    assert (changes["cores"].value, changes["cores"].node) == (45, "b")
    assert "memory" not in changes  # memory is not what is short


def test_a_uuid_choice_that_excludes_every_free_card_can_be_dropped() -> None:
    annotations = {"nvidia.com/use-gpuuuid": "GPU-a"}
    report = explain(plan(annotations, gpu=1, mem=8000), [node("a", used=20000), node("b")])
    changes = {s.change: s for s in report.suggestions}
    assert changes["uuids"].node == "b"


def test_waiting_names_the_fewest_pods_and_ignores_priorities() -> None:
    nodes = [node("a", used=20000), node("b", used=22000)]
    holders = [
        ("a", Victim("default/x", "default", 1000, {"GPU-a": Usage(1, 12000, 0)})),
        ("a", Victim("default/y", "default", 0, {"GPU-a": Usage(1, 8000, 0)})),
        ("b", Victim("default/z", "default", 0, {"GPU-b": Usage(1, 22000, 0)})),
    ]
    report = explain(plan(gpu=1, mem=8000), nodes, holders=holders)
    changes = {s.change: s for s in report.suggestions}
    assert changes["wait"].value == ["default/y"] and changes["wait"].node == "a"


def test_the_short_form_names_the_closest_node() -> None:
    report = explain(plan(gpu=1, mem=8000), [node("a", used=20000), node("b", used=18000)])
    assert report.short_form().startswith("closest: b: closest card GPU-b")


def test_a_blocked_namespace_is_said_so() -> None:
    report = explain(plan(gpu=1, mem=8000), [node("a")], Budget(memory=0, blocked=True))
    assert report.groups[0].label == "over namespace quota"
    assert "the namespace's GPU quota is 0" in report.groups[0].closest.sentence


def test_a_mig_pod_is_shown_its_instance_or_why_no_placement_is_free() -> None:
    mig = {"nvidia.com/vgpu-mode": "mig"}
    free = NodeView("a100", (mig_card("GPU-mig"),), {})
    report = explain(plan(mig, gpu=1, mem=9000), [free], suggest=False)
    assert report.lines()[1] == (
        "  would get: node a100, cards GPU-mig 9856 MiB 15% cores as MIG 1g.10gb at slices 6-6"
    )
    assert report.to_dict()["placement"]["grants"][0][0]["mig"] == {
        "profile": "1g.10gb",
        "placement": {"start": 6, "size": 1},
    }
    halves = NodeView("a100", (mig_card("GPU-mig"),), {"GPU-mig": Usage(2, 80384, 86, 0xFF)})
    refused = explain(plan(mig, gpu=1, mem=1000), [halves], suggest=False)
    (verdict,) = refused.verdicts
    assert verdict.reason == "CardMigTopologyInfeasible"
    assert verdict.sentence.startswith(
        "1 MIG card has no free placement for a profile of at least 1000 MiB"
    )
