"""Priority feedback: HAMi's monitor rules (docs/protocol.md#priority-feedback), on values and on region files."""

import struct
from pathlib import Path

from tests.unit.monitor.regionbytes import UUID_A, UUID_B, Spec, v0_bytes, v1_bytes, write_region
from vgpu.adapters.hamicore import HamiCoreRegions
from vgpu.app.monitor.daemon import MonitorDaemon
from vgpu.app.monitor.feedback import Feedback, plan
from vgpu.domain.pod import Pod
from vgpu.ports.accounting import CacheDir, Region


def _region(uuids: tuple[str, ...], priority: int, recent_kernel: int) -> Region:
    return Region(
        layout=1,
        major=1,
        minor=2,
        device_count=len(uuids),
        uuids=uuids,
        limits=(0,) * 16,
        sm_limits=(0,) * 16,
        processes=(),
        utilization_switch=1,
        recent_kernel=recent_kernel,
        priority=priority,
        last_kernel_time=0,
    )


def _dir(name: str) -> CacheDir:
    return CacheDir(name, "main", Path("/c") / f"{name}_main", 0.0)


def _plan(**containers: tuple[tuple[str, ...], int, int]) -> dict[str, tuple[int | None, int]]:
    given = [(_dir(name), _region(*values)) for name, values in containers.items()]
    return {f.entry.pod_uid: (f.recent_kernel, f.utilization_switch) for f in plan(given)}


def test_a_container_alone_on_its_gpu_runs_unthrottled() -> None:
    assert _plan(a=((UUID_A,), 1, 2)) == {"a": (1, 0)}


def test_two_active_containers_of_one_priority_on_a_gpu_enforce_their_limits() -> None:
    assert _plan(a=((UUID_A,), 1, 2), b=((UUID_A,), 1, 2)) == {"a": (1, 1), "b": (1, 1)}


def test_containers_on_different_gpus_do_not_interact() -> None:
    assert _plan(a=((UUID_A,), 1, 2), b=((UUID_B,), 1, 2)) == {"a": (1, 0), "b": (1, 0)}


def test_a_lower_priority_container_is_blocked_while_a_higher_one_is_active() -> None:
    found = _plan(high=((UUID_A,), 0, 2), low=((UUID_A, UUID_B), 1, 2))

    assert found == {"high": (1, 0), "low": (-1, 1)}


def test_an_idle_container_sharing_with_an_active_higher_one_is_blocked_too() -> None:
    assert _plan(high=((UUID_A,), 0, 2), low=((UUID_A,), 1, 0))["low"] == (-1, 1)


def test_a_blocked_container_stays_blocked_without_a_new_write() -> None:
    assert _plan(high=((UUID_A,), 0, 2), low=((UUID_A,), 1, -1))["low"] == (None, 1)


def test_a_blocked_container_is_released_once_the_higher_one_lapses() -> None:
    # recent_kernel 1 decrements to 0: the high-priority task is no longer active
    assert _plan(high=((UUID_A,), 0, 1), low=((UUID_A,), 1, -1)) == {
        "high": (0, 0),
        "low": (0, 0),
    }


def test_an_untouched_idle_container_gets_no_kernel_write() -> None:
    assert _plan(a=((UUID_A,), 1, 0)) == {"a": (None, 0)}


def test_a_negative_priority_is_never_counted_active() -> None:
    assert _plan(a=((UUID_A,), -1, 2), b=((UUID_A,), 1, 2)) == {"a": (1, 0), "b": (1, 0)}


def test_empty_device_slots_are_ignored() -> None:
    assert _plan(a=(("",), 0, 2), b=(("",), 1, 2)) == {"a": (1, 0), "b": (1, 0)}


def test_plan_returns_one_feedback_per_region_in_order() -> None:
    given = [(_dir(n), _region((UUID_A,), 1, 0)) for n in ("x", "y")]

    assert plan(given) == [Feedback(_dir("x"), None, 0), Feedback(_dir("y"), None, 0)]


def _spec(priority: int, recent_kernel: int) -> Spec:
    return Spec(
        uuids=[UUID_A],
        limits=[1 << 30],
        sm_limits=[30],
        procs=[],
        priority=priority,
        recent_kernel=recent_kernel,
        utilization_switch=1,
    )


def _int32(path: Path, offset: int) -> int:
    value: int = struct.unpack_from("<i", path.read_bytes(), offset)[0]
    return value


def test_a_tick_writes_the_feedback_into_the_region_files(tmp_path: Path) -> None:
    high = write_region(tmp_path / "uid-high_main", v1_bytes(_spec(priority=0, recent_kernel=2)))
    low = write_region(tmp_path / "uid-low_main", v0_bytes(_spec(priority=1, recent_kernel=2)))
    pods = [Pod("ns", "high", uid="uid-high"), Pod("ns", "low", uid="uid-low")]
    regions = HamiCoreRegions(tmp_path, writable=True)
    daemon = MonitorDaemon(
        regions, lambda: pods, interval=5, cleanup_grace=300, priority_feedback=True
    )

    daemon.tick()
    regions.close()

    assert (_int32(high, 2_008_904), _int32(high, 2_008_900)) == (1, 0)
    assert (_int32(low, 1_197_888), _int32(low, 1_197_884)) == (-1, 1)


def test_with_feedback_off_a_tick_writes_nothing(tmp_path: Path) -> None:
    data = bytes(v1_bytes(_spec(priority=0, recent_kernel=2)))
    path = write_region(tmp_path / "uid-high_main", data)
    pods = [Pod("ns", "high", uid="uid-high")]
    daemon = MonitorDaemon(
        HamiCoreRegions(tmp_path),
        lambda: pods,
        interval=5,
        cleanup_grace=300,
        priority_feedback=False,
    )

    daemon.tick()

    assert path.read_bytes() == data
