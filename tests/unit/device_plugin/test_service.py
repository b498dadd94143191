from pathlib import Path

from tests.unit.device_plugin.builders import UUID_A, UUID_B, scheduled_pod, world
from vgpu.app.device_plugin.service import DevicePluginService
from vgpu.domain.inventory import HealthEvent
from vgpu.ports.kubelet import PluginOptions, PreferredRequest


def _service(tmp_path: Path, split_count: int = 2) -> tuple[DevicePluginService, object]:
    w = world(tmp_path, split_count=split_count)
    return DevicePluginService(w.gpus, w.allocator, True, watch_poll_s=0), w


def test_options_offer_preferred_allocation_and_no_pre_start(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    assert service.options() == PluginOptions(
        pre_start_required=False, get_preferred_allocation_available=True
    )


def test_list_and_watch_sends_the_list_then_a_new_one_after_a_health_change(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, split_count=2)
    service = DevicePluginService(w.gpus, w.allocator, True, watch_poll_s=0)
    stream = service.watch_devices(lambda: True)

    first = next(stream)
    w.gpus.apply([HealthEvent(UUID_B, healthy=False)])
    second = next(stream)

    assert [(d.id, d.healthy) for d in first] == [
        (f"{UUID_A}-0", True),
        (f"{UUID_A}-1", True),
        (f"{UUID_B}-0", True),
        (f"{UUID_B}-1", True),
    ]
    assert [d.healthy for d in second] == [True, True, False, False]


def test_list_and_watch_ends_when_the_stream_is_no_longer_active(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    answers = iter([True, False])
    assert len(list(service.watch_devices(lambda: next(answers)))) == 1


def test_preferred_allocation_picks_one_replica_of_each_granted_card(tmp_path: Path) -> None:
    w = world(tmp_path, split_count=3)
    service = DevicePluginService(w.gpus, w.allocator, True, watch_poll_s=0)
    w.put(scheduled_pod(f";{UUID_B},NVIDIA,1000,0:{UUID_A},NVIDIA,1000,0:;"))
    available = [f"{UUID_A}-0", f"{UUID_A}-1", f"{UUID_B}-1", f"{UUID_B}-2"]

    (choice,) = service.preferred_allocation([PreferredRequest(available, size=2)])

    assert choice == [f"{UUID_B}-1", f"{UUID_A}-0"]


def test_preferred_allocation_keeps_must_include_and_fills_the_size(tmp_path: Path) -> None:
    w = world(tmp_path, split_count=3)
    service = DevicePluginService(w.gpus, w.allocator, True, watch_poll_s=0)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:{UUID_B},NVIDIA,1000,0:;"))
    available = [f"{UUID_A}-0", f"{UUID_A}-1", f"{UUID_B}-0"]

    (choice,) = service.preferred_allocation(
        [PreferredRequest(available, must_include=[f"{UUID_A}-1"], size=2)]
    )

    assert choice == [f"{UUID_A}-1", f"{UUID_B}-0"]


def test_preferred_allocation_without_a_waiting_pod_falls_back_to_the_first_available(
    tmp_path: Path,
) -> None:
    service, _ = _service(tmp_path)
    (choice,) = service.preferred_allocation([PreferredRequest(["x-0", "y-0", "z-0"], size=2)])
    assert choice == ["x-0", "y-0"]
