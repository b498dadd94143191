"""Property-based tests: codecs round-trip; no sequence of placements over-commits a card;
the ledger rebuilt from annotations equals the incrementally kept one."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.builders import container, pod
from vgpu.domain import (
    NVIDIA,
    Device,
    DeviceGrant,
    Ledger,
    Placement,
    SchedulingConfig,
    decide,
    decode_node_devices,
    decode_pod_grants,
    encode_node_devices,
    encode_pod_grants,
    plan_pod,
)

ids = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=12).map(lambda s: f"GPU-{s}")
names = st.text(
    alphabet=st.characters(blacklist_characters='",:\\', blacklist_categories=("Cs", "Cc")),
    max_size=30,
)
int32 = st.integers(min_value=0, max_value=2**31 - 1)
devices = st.builds(
    Device,
    uuid=ids,
    index=st.integers(0, 64),
    type=names,
    count=int32,
    memory=int32,
    cores=int32,
    numa=st.integers(0, 8),
    healthy=st.booleans(),
    mode=st.sampled_from(["hami-core", "mig", "mps"]),
)
grants = st.builds(
    DeviceGrant, uuid=ids, vendor=st.just("NVIDIA"), memory=int32, cores=st.integers(0, 100)
)
container_grants = st.lists(grants, max_size=4, unique_by=lambda g: g.uuid).map(tuple)
pod_grants = st.lists(container_grants, max_size=5).map(tuple)


@given(st.lists(devices, max_size=8, unique_by=lambda d: d.uuid))
def test_node_device_codec_round_trips(cards: list[Device]) -> None:
    assert decode_node_devices(encode_node_devices(cards)) == cards


@given(pod_grants)
def test_pod_grant_codec_round_trips(value: tuple[tuple[DeviceGrant, ...], ...]) -> None:
    assert decode_pod_grants(encode_pod_grants(value)) == value


request = st.fixed_dictionaries(
    {"gpu": st.integers(1, 3), "cores": st.integers(0, 100)},
    optional={"mem": st.integers(1, 30000), "pct": st.integers(1, 100)},
)
step = st.one_of(
    st.tuples(st.just("add"), request),
    st.tuples(st.just("remove"), st.integers(0, 50)),
)
CARDS = {
    "n1": [Device(f"GPU-1{i}", i, "NVIDIA A40", 4, 24000, numa=i % 2) for i in range(3)],
    "n2": [Device(f"GPU-2{i}", i, "NVIDIA A40", 3, 16000) for i in range(2)],
}


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=40), st.sampled_from(["binpack", "spread"]))
def test_no_sequence_of_placements_over_commits_and_rebuild_matches(
    steps: list[tuple[str, object]], gpu_policy: str
) -> None:
    ledger = Ledger()
    for node, cards in CARDS.items():
        ledger.set_node(node, cards)
    annotated: dict[str, tuple[str, str]] = {}  # pod key -> (node, allocated annotation)
    for number, (kind, value) in enumerate(steps):
        if kind == "remove":
            keys = sorted(annotated)
            if keys:
                key = keys[int(value) % len(keys)]  # type: ignore[call-overload]
                ledger.release(key)
                del annotated[key]
            continue
        limits = dict(value)  # type: ignore[call-overload]
        the_pod = pod(
            container(**limits),
            name=f"p{number}",
            annotations={"hami.io/gpu-scheduler-policy": gpu_policy},
        )
        plan = plan_pod(the_pod, SchedulingConfig())
        assert plan is not None
        decision = decide(plan, [ledger.view(n) for n in ledger.nodes()])
        if isinstance(decision, Placement):
            ledger.grant(plan.key, decision.node, decision.grants)  # strict: raises on over-commit
            annotated[plan.key] = (decision.node, encode_pod_grants(decision.grants))
        for node, cards in CARDS.items():
            for card in cards:
                assert ledger.usage(node, card.uuid).fits_in(card)

    rebuilt = Ledger()
    for node, cards in CARDS.items():
        rebuilt.set_node(node, cards)
    for key, (node, text) in annotated.items():
        name = key.split("/")[1]
        restored = pod(
            container(gpu=1),
            name=name,
            annotations={"hami.io/vgpu-node": node, NVIDIA.allocated_annotation: text},
        )
        assert rebuilt.record_pod(restored, NVIDIA) == []
    for node, cards in CARDS.items():
        for card in cards:
            assert rebuilt.usage(node, card.uuid) == ledger.usage(node, card.uuid)
