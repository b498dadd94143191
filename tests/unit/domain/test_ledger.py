from dataclasses import replace

import pytest

from tests.unit.domain.builders import A40_UUIDS, a40_cards, card, container, pod
from vgpu.domain import NVIDIA, DeviceGrant, Ledger, LedgerError, Usage

A, B = A40_UUIDS


def grant(uuid: str, memory: int, cores: int = 0) -> DeviceGrant:
    return DeviceGrant(uuid, "NVIDIA", memory, cores)


def ledger_with_a40() -> Ledger:
    ledger = Ledger()
    ledger.set_node("n", a40_cards())
    return ledger


def test_grant_then_release_restores_idle() -> None:
    ledger = ledger_with_a40()
    assert ledger.grant("ns/p", "n", ((grant(A, 20000, 80),),)) == []
    assert ledger.usage("n", A) == Usage(1, 20000, 80)
    assert ledger.release("ns/p") is True
    assert ledger.usage("n", A) == Usage()


def test_releasing_twice_is_harmless() -> None:
    ledger = ledger_with_a40()
    ledger.grant("ns/p", "n", ((grant(A, 100),),))
    ledger.grant("ns/q", "n", ((grant(A, 200),),))
    ledger.release("ns/p")
    assert ledger.release("ns/p") is False
    assert ledger.usage("n", A) == Usage(1, 200, 0)


def test_granting_the_same_pod_again_replaces_the_grant() -> None:
    ledger = ledger_with_a40()
    ledger.grant("ns/p", "n", ((grant(A, 100),),))
    ledger.grant("ns/p", "n", ((grant(B, 300),),))
    assert ledger.usage("n", A) == Usage() and ledger.usage("n", B) == Usage(1, 300, 0)


def test_strict_grant_refuses_to_over_commit_and_changes_nothing() -> None:
    ledger = ledger_with_a40()
    ledger.grant("ns/p", "n", ((grant(A, 40000),),))
    with pytest.raises(LedgerError, match="over capacity"):
        ledger.grant("ns/q", "n", ((grant(A, 10000),), (grant(B, 10),)))
    assert ledger.usage("n", B) == Usage() and ledger.allocation("ns/q") is None


def test_unknown_node_or_card_is_reported_and_kept() -> None:
    ledger = ledger_with_a40()
    problems = ledger.grant("ns/p", "n", ((grant("GPU-gone", 100),),))
    assert problems == ["pod ns/p: card 'GPU-gone' is not on node n; its grant is kept"]
    assert ledger.grant("ns/q", "elsewhere", ((grant(A, 1),),))[0].startswith(
        "pod ns/q: node elsewhere"
    )
    ledger.set_node("elsewhere", a40_cards())
    assert ledger.usage("elsewhere", A) == Usage(1, 1, 0)


def test_cards_a_node_lacks_are_named_in_one_line_each_id_cut_short() -> None:
    ledger = ledger_with_a40()
    tenant_ids = [f"GPU-{i}-" + "x" * 5000 for i in range(1000)]
    grants = tuple((grant(uuid, 1),) for uuid in tenant_ids)
    [problem] = ledger.grant("ns/p", "n", grants)
    assert problem.startswith("pod ns/p: cards 'GPU-0-xxx") and len(problem) < 600
    assert "(5008 characters)" in problem and "and 997 more are not on node n" in problem
    assert ledger.allocation("ns/p") is not None  # kept all the same


def test_replacing_a_nodes_cards_keeps_usage_of_cards_that_stay() -> None:
    ledger = ledger_with_a40()
    ledger.grant("ns/p", "n", ((grant(A, 100),),))
    ledger.set_node("n", [card(A, 0, healthy=False)])
    view = ledger.view("n")
    assert [d.uuid for d in view.devices] == [A] and not view.devices[0].healthy
    assert view.usage[A] == Usage(1, 100, 0)


def test_record_pod_follows_annotations_and_phase() -> None:
    ledger = ledger_with_a40()
    annotations = {"hami.io/vgpu-node": "n", NVIDIA.allocated_annotation: f"{A},NVIDIA,3000,10:;"}
    running = pod(container(gpu=1, mem=3000), name="p", annotations=annotations)
    assert ledger.record_pod(running, NVIDIA) == []
    assert ledger.usage("n", A) == Usage(1, 3000, 10)
    ledger.record_pod(replace(running, phase="Succeeded"), NVIDIA)
    assert ledger.usage("n", A) == Usage()


def test_overfill_says_which_card_would_pass_its_capacity_and_changes_nothing() -> None:
    ledger = ledger_with_a40()
    ledger.grant("ns/p", "n", ((grant(A, 40000),),))
    late = ((grant(A, 10000),),)

    why = ledger.overfill("ns/q", "n", late)

    assert why is not None and f"card {A} on n would be over capacity" in why
    assert "50000/46068 MiB" in why
    assert ledger.allocation("ns/q") is None and ledger.usage("n", A) == Usage(1, 40000, 0)
    assert ledger.overfill("ns/q", "n", ((grant(B, 10000),),)) is None
    assert ledger.overfill("ns/p", "n", ((grant(A, 46068),),)) is None  # its own grant left out


def test_misfit_tells_a_hold_that_no_longer_fits_beside_the_others() -> None:
    ledger = ledger_with_a40()
    ledger.grant("ns/p", "n", ((grant(A, 30000),),))
    assert ledger.misfit("ns/p") is None
    ledger.grant("ns/bound", "n", ((grant(A, 30000),),), strict=False)
    assert "would be over capacity" in (ledger.misfit("ns/p") or "")
    assert ledger.misfit("ns/nobody") is None
