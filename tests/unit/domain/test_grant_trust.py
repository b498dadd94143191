"""The one rule for which grant is believed, as the scheduler and the device plugin ask it."""

import doctest

import pytest

from vgpu.domain.pod import Pod
from vgpu.domain.trust import (
    GRANT_SIGNATURE_ANNOTATION,
    KeyRing,
    NamedSchedulers,
    Signatures,
    grant_claim,
    grant_trust,
    judge_grant,
)
from vgpu.domain.vendor import NVIDIA

RING = KeyRing({"k1": b"k" * 32})
GRANT = "GPU-0,NVIDIA,1000,10:;"


def pod(node: str = "n1", bound: str = "n1", **annotations: str) -> Pod:
    notes = {"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": GRANT, **annotations}
    return Pod(
        "default",
        "p",
        uid="u1",
        annotations=notes,
        node_name=bound,
        scheduler_name="vgpu-scheduler",
    )


def signed(p: Pod) -> Pod:
    claim = grant_claim(p.uid, p.annotations, NVIDIA)
    assert claim is not None
    notes = {**p.annotations, GRANT_SIGNATURE_ANNOTATION: RING.sign(claim)}
    return Pod(
        p.namespace,
        p.name,
        uid=p.uid,
        annotations=notes,
        node_name=p.node_name,
        scheduler_name=p.scheduler_name,
    )


def test_a_signed_grant_is_believed_and_comes_decoded() -> None:
    verdict = judge_grant(signed(pod()), NVIDIA, Signatures(RING), node="n1")

    assert verdict.trusted
    assert verdict.grants is not None
    assert [(g.uuid, g.memory, g.cores) for g in verdict.grants[0]] == [("GPU-0", 1000, 10)]


@pytest.mark.parametrize(
    ("subject", "problem"),
    [
        (pod(), "has no vgpu.io/grant-signature"),
        (pod(**{GRANT_SIGNATURE_ANNOTATION: "k1:forged"}), "does not verify"),
        (pod(bound="n2"), "bound to n2 but its grant names node n1"),
        (pod(**{"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,x,10:;"}), "memory"),
    ],
)
def test_unsigned_forged_misplaced_or_unreadable_grants_are_not_believed(
    subject: Pod, problem: str
) -> None:
    verdict = judge_grant(subject, NVIDIA, Signatures(RING))

    assert not verdict.trusted
    assert verdict.claim is not None
    assert problem in verdict.problem


def test_a_signature_for_another_node_does_not_verify_once_moved() -> None:
    moved = signed(pod(node="n2", bound=""))
    notes = {**moved.annotations, "hami.io/vgpu-node": "n1"}
    tampered = Pod("default", "p", uid="u1", annotations=notes, node_name="n1")

    assert "does not verify" in judge_grant(tampered, NVIDIA, Signatures(RING)).problem


def test_the_plugin_also_requires_its_own_node() -> None:
    verdict = judge_grant(signed(pod()), NVIDIA, Signatures(RING), node="n9")

    assert "both must be this node, n9" in verdict.problem


def test_no_loaded_ring_believes_nothing() -> None:
    assert judge_grant(signed(pod()), NVIDIA, Signatures(None)).problem == (
        "no grant signing key is loaded yet"
    )


def test_with_signing_off_the_named_scheduler_decides() -> None:
    assert judge_grant(pod(), NVIDIA, NamedSchedulers(frozenset({"vgpu-scheduler"}))).trusted
    assert (
        "not one of the trusted schedulers (hami-scheduler)"
        in judge_grant(pod(), NVIDIA, NamedSchedulers(frozenset({"hami-scheduler"}))).problem
    )


def test_taking_over_from_hami_believes_unsigned_grants_of_hamis_scheduler_only() -> None:
    takeover = Signatures(RING, unsigned_from=frozenset({"hami-scheduler"}))
    hami = Pod(
        "default",
        "p",
        uid="u1",
        annotations=pod().annotations,
        node_name="n1",
        scheduler_name="hami-scheduler",
    )

    assert judge_grant(hami, NVIDIA, takeover).trusted
    assert "has no vgpu.io/grant-signature" in judge_grant(pod(), NVIDIA, takeover).problem


def test_a_pod_without_a_grant_claims_nothing() -> None:
    verdict = judge_grant(Pod("default", "p"), NVIDIA, Signatures(RING))

    assert verdict.claim is None and not verdict.trusted and verdict.problem == ""


def test_docstring_example_holds() -> None:
    result = doctest.testmod(grant_trust)
    assert result.attempted > 0 and result.failed == 0
