"""Node and card fullness, the number binpack and spread rank by, stays the same arithmetic."""

from hypothesis import given
from hypothesis import strategies as st

from vgpu.domain import Device, Usage
from vgpu.domain.policy import card_fullness, fullness

cards = st.builds(
    Device,
    uuid=st.text(min_size=1, max_size=8),
    index=st.integers(0, 16),
    type=st.just("NVIDIA A100-SXM4-80GB"),
    count=st.integers(0, 20),
    memory=st.integers(0, 200_000),
    cores=st.integers(0, 200),
)
usages = st.builds(Usage, st.integers(0, 20), st.integers(0, 200_000), st.integers(0, 200))


def reference(devices: list[Device], used: list[Usage]) -> float:
    """Fractions of the summed capacity, as `Usage` arithmetic gives them."""
    total = sum(used, Usage())

    def ratio(part: int, whole: int) -> float:
        return part / whole if whole > 0 else 0.0

    return (
        ratio(total.slices, sum(d.count for d in devices))
        + ratio(total.cores, sum(d.cores for d in devices))
        + ratio(total.memory, sum(d.memory for d in devices))
    )


@given(st.lists(st.tuples(cards, usages), max_size=16))
def test_node_fullness_is_the_used_share_of_each_resource_summed(
    pairs: list[tuple[Device, Usage]],
) -> None:
    devices = [d for d, _ in pairs]
    used = [u for _, u in pairs]
    assert fullness(devices, used) == reference(devices, used)


@given(cards, usages)
def test_card_fullness_is_node_fullness_of_one_card(device: Device, used: Usage) -> None:
    assert card_fullness(device, used) == fullness([device], [used]) == reference([device], [used])


def test_a_half_used_card_is_half_full_on_each_resource() -> None:
    card = Device("GPU-1", 0, "NVIDIA A100-SXM4-80GB", count=10, memory=80_000, cores=100)
    assert card_fullness(card, Usage(slices=5, memory=40_000, cores=50)) == 1.5
