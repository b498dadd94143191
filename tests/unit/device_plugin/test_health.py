import threading

from tests.unit.device_plugin.builders import GPUS, UUID_B
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.domain.inventory import SharingConfig


def test_a_gpu_marked_unhealthy_reaches_the_state() -> None:
    port = FakeGpus(GPUS)
    state = GpuState(port.discover(), SharingConfig(split_count=1))
    watcher = HealthWatcher(port, state, poll_s=0)

    port.mark_unhealthy(UUID_B, "Xid 79")
    assert watcher.step()

    _, devices = state.plugin_devices()
    assert [d.healthy for d in devices] == [True, False]
    assert not watcher.step()


def test_run_survives_a_failing_port_and_ends_on_stop() -> None:
    stop = threading.Event()

    class Broken:
        def discover(self) -> list[object]:
            return []

        def wait_for_health_events(self, timeout_s: float) -> list[object]:
            stop.set()
            raise RuntimeError("NVML went away")

        def close(self) -> None:
            return None

    watcher = HealthWatcher(Broken(), GpuState(GPUS, SharingConfig()), retry_s=0)  # type: ignore[arg-type]
    watcher.run(stop)
    assert stop.is_set()
