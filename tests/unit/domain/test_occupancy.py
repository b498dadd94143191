"""The counting rule: which pods' grants occupy cards, signed or not (issue 17)."""

import doctest

import pytest

from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import (
    GRANT_SIGNATURE_ANNOTATION,
    Basis,
    KeyRing,
    NamedSchedulers,
    Signatures,
    grant_claim,
    judge_occupancy,
    occupancy,
)
from vgpu.domain.trust.occupancy import holds_gpus
from vgpu.domain.vendor import NVIDIA, Vendor

RING = KeyRing({"k1": b"k" * 32})
SIGNING = Signatures(RING)
GRANT = "GPU-0,NVIDIA,1000,10:;"
ASKS_A_CARD = (Container("main", limits={"nvidia.com/gpu": 1}),)


def pod(
    bound: str = "n1",
    granted_on: str = "n1",
    containers: tuple[Container, ...] = ASKS_A_CARD,
    phase: str = "Running",
    scheduler: str = "hami-scheduler",
    **annotations: str,
) -> Pod:
    notes = {"hami.io/vgpu-node": granted_on, "hami.io/vgpu-devices-allocated": GRANT}
    return Pod(
        "default",
        "p",
        uid="u1",
        annotations={**notes, **annotations},
        containers=containers,
        node_name=bound,
        scheduler_name=scheduler,
        phase=phase,
    )


def signed(p: Pod) -> Pod:
    claim = grant_claim(p.uid, p.annotations, NVIDIA)
    assert claim is not None
    notes = {**p.annotations, GRANT_SIGNATURE_ANNOTATION: RING.sign(claim)}
    return Pod(p.namespace, p.name, uid=p.uid, annotations=notes, node_name=p.node_name)


def test_a_signed_grant_counts_as_trusted_bound_or_not() -> None:
    assert judge_occupancy(signed(pod()), NVIDIA, SIGNING).basis is Basis.SIGNED
    assert judge_occupancy(signed(pod(bound="")), NVIDIA, SIGNING).basis is Basis.SIGNED


def test_a_running_pod_that_holds_gpus_counts_its_unsigned_grant() -> None:
    judged = judge_occupancy(pod(), NVIDIA, SIGNING)

    assert judged.basis is Basis.HOLDS_GPUS
    assert judged.grants is not None and judged.grants[0][0].memory == 1000
    assert "has no vgpu.io/grant-signature" in judged.verdict.problem  # still not believed


@pytest.mark.parametrize(
    ("subject", "why"),
    [
        (pod(containers=(Container("main", limits={"cpu": "1"}),)), "asks for no nvidia.com/gpu"),
        (pod(containers=(Container("main", limits={"nvidia.com/gpu": "0"}),)), "asks for no"),
        (pod(containers=(Container("main", limits={"nvidia.com/gpu": "x"}),)), "asks for no"),
        (pod(bound=""), "has no vgpu.io/grant-signature"),  # pending: only a believed grant
        (pod(bound="n2"), "bound to n2 but its grant names node n1"),
        (pod(phase="Failed"), "the pod is Failed"),  # its Allocate was refused, say
        (pod(phase="Succeeded"), "the pod is Succeeded"),
        (pod(**{"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,lots,10:;"}), "memory"),
    ],
)
def test_forged_pending_misplaced_finished_or_unreadable_grants_count_for_nothing(
    subject: Pod, why: str
) -> None:
    judged = judge_occupancy(subject, NVIDIA, SIGNING)

    assert not judged.counts
    assert why in judged.why_not


def test_a_pod_without_a_grant_counts_for_nothing_and_says_nothing() -> None:
    bare = Pod("default", "p", uid="u1", containers=ASKS_A_CARD, node_name="n1")
    judged = judge_occupancy(bare, NVIDIA, SIGNING)
    assert not judged.counts and judged.claim is None and judged.why_not == ""


def test_the_configured_count_resource_is_the_one_asked_for() -> None:
    vendor = Vendor(count_resource="example.com/gpu")
    theirs = pod(containers=(Container("main", limits={"example.com/gpu": "1"}),))
    assert holds_gpus(theirs, vendor)
    assert not holds_gpus(pod(), vendor)
    init_only = pod(containers=(Container("init", limits={"nvidia.com/gpu": 1}, is_init=True),))
    assert holds_gpus(init_only, NVIDIA)
    requests_only = pod(containers=(Container("main", requests={"nvidia.com/gpu": "2"}),))
    assert holds_gpus(requests_only, NVIDIA)


def test_grants_believed_unsigned_count_as_the_named_schedulers() -> None:
    signing_off = NamedSchedulers(frozenset({"hami-scheduler"}))
    taking_over = Signatures(RING, unsigned_from=frozenset({"hami-scheduler"}))
    assert judge_occupancy(pod(bound=""), NVIDIA, signing_off).basis is Basis.NAMED
    assert judge_occupancy(pod(bound=""), NVIDIA, taking_over).basis is Basis.NAMED
    assert judge_occupancy(signed(pod()), NVIDIA, taking_over).basis is Basis.SIGNED


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(occupancy).failed == 0
