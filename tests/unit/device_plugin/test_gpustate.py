from dataclasses import replace

from tests.unit.device_plugin.builders import GPUS, UUID_A, UUID_B
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.domain.inventory import HealthEvent, SharingConfig


def test_each_gpu_is_advertised_as_split_count_replicas() -> None:
    state = GpuState(GPUS, SharingConfig(split_count=3))

    _, devices = state.plugin_devices()

    assert [d.id for d in devices] == [
        f"{UUID_A}-0",
        f"{UUID_A}-1",
        f"{UUID_A}-2",
        f"{UUID_B}-0",
        f"{UUID_B}-1",
        f"{UUID_B}-2",
    ]
    assert all(d.healthy and d.numa is None for d in devices)
    assert state.physical_uuid(f"{UUID_B}-2") == UUID_B
    assert state.physical_uuid(f"{UUID_B}-3") is None


def test_numa_topology_is_sent_only_when_enabled() -> None:
    _, devices = GpuState(GPUS, SharingConfig(split_count=1), numa_topology=True).plugin_devices()
    assert [d.numa for d in devices] == [0, 1]


def test_a_gpu_of_unknown_numa_node_is_advertised_without_one_and_registered_on_0() -> None:
    gpus = [replace(GPUS[0], numa=-1), GPUS[1]]
    state = GpuState(gpus, SharingConfig(split_count=2), numa_topology=True)

    _, devices = state.plugin_devices()

    assert [(d.id, d.numa) for d in devices] == [
        (f"{UUID_A}-0", None),
        (f"{UUID_A}-1", None),
        (f"{UUID_B}-0", 1),
        (f"{UUID_B}-1", 1),
    ]
    assert [card.numa for card in state.registered_devices()] == [0, 1]  # as HAMi writes it


def test_registered_cards_carry_scaling_and_health() -> None:
    state = GpuState(GPUS, SharingConfig(split_count=4, memory_scaling=1.5, core_scaling=2))
    state.apply([HealthEvent(UUID_B, healthy=False, reason="Xid 79")])

    a, b = state.registered_devices()

    assert (a.type, a.count, a.memory, a.cores, a.healthy) == (
        "NVIDIA-Tesla V100-PCIE-32GB",
        4,
        49152,
        200,
        True,
    )
    assert (b.numa, b.healthy) == (1, False)


def test_a_health_change_bumps_the_generation_and_calls_listeners() -> None:
    state = GpuState(GPUS, SharingConfig(split_count=2))
    calls: list[int] = []
    state.on_change(lambda: calls.append(state.generation))
    before = state.generation

    changed = state.apply([HealthEvent(UUID_A, healthy=False)])

    assert changed and calls == [before + 1]
    generation, devices = state.plugin_devices()
    assert generation == before + 1
    assert [d.healthy for d in devices] == [False, False, True, True]
    assert state.wait_for_change(before, timeout_s=0) == before + 1


def test_repeated_or_unknown_events_change_nothing() -> None:
    state = GpuState(GPUS, SharingConfig(split_count=2))
    calls: list[str] = []
    state.on_change(lambda: calls.append("x"))

    assert not state.apply([HealthEvent(UUID_A, healthy=True), HealthEvent("GPU-zzz", False)])
    assert calls == [] and state.generation == 0


def test_card_returns_none_for_a_gpu_this_node_lacks() -> None:
    state = GpuState(GPUS, SharingConfig())
    assert state.card("GPU-nope") is None
    card = state.card(UUID_A)
    assert card is not None and card.memory == 32768
