"""Decoding HAMi-core's shared region: every field of both layouts, and every way it fails."""

import pytest

from tests.unit.monitor.regionbytes import (
    GIB,
    MIB,
    UUID_A,
    UUID_B,
    V0_SIZE,
    V1_SIZE,
    Proc,
    Spec,
    two_gpu_spec,
    v0_bytes,
    v1_bytes,
)
from vgpu.adapters.hamicore.layout import decode
from vgpu.ports.accounting import (
    DeviceMemory,
    DeviceUtilization,
    ProcessSlot,
    Region,
    RegionUnreadable,
)

ZERO_MEMORY = DeviceMemory(0, 0, 0, 0, 0)
ZERO_UTIL = DeviceUtilization(0, 0, 0)


def _memory(**by_device: tuple[int, int, int, int, int]) -> tuple[DeviceMemory, ...]:
    found = [ZERO_MEMORY] * 16
    for key, value in by_device.items():
        found[int(key[1:])] = DeviceMemory(*value)
    return tuple(found)


def _util(**by_device: tuple[int, int, int]) -> tuple[DeviceUtilization, ...]:
    found = [ZERO_UTIL] * 16
    for key, value in by_device.items():
        found[int(key[1:])] = DeviceUtilization(*value)
    return tuple(found)


def _sixteen(*values: int) -> tuple[int, ...]:
    return (*values, *([0] * (16 - len(values))))


def _expected(layout: int, major: int, minor: int, last_kernel: int) -> Region:
    return Region(
        layout=layout,
        major=major,
        minor=minor,
        device_count=2,
        uuids=(UUID_A, UUID_B),
        limits=_sixteen(3000 * MIB, 5 * GIB),
        sm_limits=_sixteen(30, 0),
        processes=(
            ProcessSlot(
                pid=17,
                host_pid=90017,
                memory=_memory(d0=(300 * MIB, 20 * MIB, 700 * MIB, 2 * MIB, 1022 * MIB)),
                monitor_used=_sixteen(1030 * MIB),
                utilization=_util(d0=(1, 2, 35)),
                status=1,
            ),
            ProcessSlot(
                pid=18,
                host_pid=90018,
                memory=_memory(
                    d0=(100 * MIB, 0, 400 * MIB, 0, 500 * MIB),
                    d1=(300 * MIB, 10 * MIB, 2 * GIB, 0, 310 * MIB + 2 * GIB),
                ),
                monitor_used=_sixteen(),
                utilization=_util(d0=(0, 0, 5), d1=(3, 4, 60)),
                status=2,
            ),
            ProcessSlot(
                pid=19,
                host_pid=0,
                memory=_memory(d0=(GIB, GIB, GIB, 0, 3 * GIB)),
                monitor_used=_sixteen(),
                utilization=_util(d0=(0, 0, 99)),
                status=0,
            ),
        ),
        utilization_switch=1,
        recent_kernel=2,
        priority=0,
        last_kernel_time=last_kernel,
    )


@pytest.mark.parametrize("minor", [1, 2])
def test_layout_1_decodes_every_field(minor: int) -> None:
    data = v1_bytes(two_gpu_spec(minor=minor))

    assert decode(data, len(data)) == _expected(1, 1, minor, 1_760_000_000)


def test_layout_0_decodes_every_field_and_has_no_kernel_time() -> None:
    data = v0_bytes(two_gpu_spec(sm_init_flag=1))

    assert decode(data, len(data)) == _expected(0, 0, 0, 0)


def test_the_exact_struct_sizes_are_accepted() -> None:
    v1 = v1_bytes(two_gpu_spec())[:V1_SIZE]
    v0 = v0_bytes(two_gpu_spec())[:V0_SIZE]

    assert decode(v1, V1_SIZE).layout == 1
    assert decode(v0, V0_SIZE).layout == 0


def test_processes_in_the_last_slot_and_devices_in_the_last_index_are_read() -> None:
    uuids = [f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(16)]
    last = Proc(pid=1024, status=1, used={15: (1, 2, 3, 4, 10)}, util={15: (7, 8, 9)})
    procs = [Proc(pid=k + 1, status=0) for k in range(1023)] + [last]
    spec = Spec(uuids=uuids, limits=[GIB] * 16, sm_limits=[50] * 16, procs=procs)

    for data in (v1_bytes(spec), v0_bytes(spec)):
        region = decode(data, len(data))

        assert region.device_count == 16
        assert region.uuids[15] == uuids[15]
        assert len(region.processes) == 1024
        tail = region.processes[-1]
        assert (tail.pid, tail.status) == (1024, 1)
        assert tail.memory[15] == DeviceMemory(1, 2, 3, 4, 10)
        assert tail.utilization[15] == DeviceUtilization(7, 8, 9)


def test_counts_out_of_range_are_clamped_as_hamis_monitor_does() -> None:
    data = v1_bytes(two_gpu_spec(device_num=40, proc_num=5000))
    region = decode(data, len(data))
    assert region.device_count == 16
    assert len(region.processes) == 1024

    data = v1_bytes(two_gpu_spec(proc_num=-3))
    assert decode(data, len(data)).processes == ()


def test_only_the_first_proc_num_slots_are_read() -> None:
    data = v1_bytes(two_gpu_spec(proc_num=1))

    assert [p.pid for p in decode(data, len(data)).processes] == [17]


def test_a_uuid_that_is_not_utf8_reads_as_empty() -> None:
    spec = two_gpu_spec()
    data = v1_bytes(spec)
    data[64 + 96 : 64 + 96 + 4] = b"\xff\xfe\x00\x00"

    assert decode(data, len(data)).uuids == (UUID_A, "")


@pytest.mark.parametrize(
    ("size", "reason"),
    [
        (0, "truncated: 0 bytes"),
        (11, "truncated: 11 bytes"),
        (12, "unknown layout: 12 bytes, version 1.2"),
        (V0_SIZE - 1, f"unknown layout: {V0_SIZE - 1} bytes"),
    ],
)
def test_truncated_files_are_refused_with_the_reason(size: int, reason: str) -> None:
    data = v1_bytes(two_gpu_spec())[:size]

    with pytest.raises(RegionUnreadable, match=reason):
        decode(data, size)


def test_a_wrong_magic_is_refused() -> None:
    data = v1_bytes(two_gpu_spec())
    data[0:4] = (12345).to_bytes(4, "little")

    with pytest.raises(RegionUnreadable, match="wrong magic 12345 at offset 0"):
        decode(data, len(data))


def test_an_unknown_major_version_is_refused() -> None:
    data = v1_bytes(two_gpu_spec(major=2, minor=0))

    with pytest.raises(RegionUnreadable, match=f"unknown layout: {V1_SIZE + 1} bytes, version 2.0"):
        decode(data, len(data))


def test_a_layout_1_file_cut_into_layout_0_size_reads_as_layout_0_as_in_hami() -> None:
    # HAMi tells layout 0 by size alone; the reader must agree with it, not guess better.
    data = v1_bytes(two_gpu_spec())[:V0_SIZE]

    assert decode(data, V0_SIZE).layout == 0
