"""Synthetic HAMi-core shared regions, written byte by byte from the layouts in docs/protocol.md#shared-region.

Every offset below is typed in from the documented tables, not taken from the reader's
structs, so a reader that gets an offset wrong fails the tests. The file is the struct size
plus the one NUL byte HAMi-core writes after it (`lseek(sizeof)` + write).
"""

import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = 19920718
V0_SIZE = 1_197_896
V1_SIZE = 2_008_952


@dataclass
class Proc:
    pid: int
    hostpid: int = 0
    status: int = 1
    # device index -> (context, module, data, offset, total)
    used: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    monitorused: dict[int, int] = field(default_factory=dict)
    # device index -> (dec, enc, sm)
    util: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    seqlock: int = 0


@dataclass
class Spec:
    uuids: list[str]
    limits: list[int]
    sm_limits: list[int]
    procs: list[Proc]
    device_num: int | None = None  # default len(uuids)
    proc_num: int | None = None  # default len(procs)
    utilization_switch: int = 1
    recent_kernel: int = 2
    priority: int = 1
    last_kernel_time: int = 0
    major: int = 1
    minor: int = 2
    sm_init_flag: int = 0
    owner_pid: int = 4242


def _u64(buf: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<Q", buf, offset, value)


def _i32(buf: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<i", buf, offset, value)


def _u32(buf: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<I", buf, offset, value)


def _uuid(buf: bytearray, offset: int, text: str | bytes) -> None:
    raw = text.encode() if isinstance(text, str) else text
    buf[offset : offset + len(raw)] = raw


def v1_bytes(spec: Spec) -> bytearray:
    buf = bytearray(V1_SIZE + 1)
    _i32(buf, 0, MAGIC)
    _u32(buf, 4, spec.major)
    _u32(buf, 8, spec.minor)
    _i32(buf, 12, spec.sm_init_flag)
    _u64(buf, 16, spec.owner_pid)
    buf[24:56] = b"\x5a" * 32  # sem_t: opaque, never read
    _u64(buf, 56, len(spec.uuids) if spec.device_num is None else spec.device_num)
    for i, uuid in enumerate(spec.uuids):
        _uuid(buf, 64 + 96 * i, uuid)
    for i, limit in enumerate(spec.limits):
        _u64(buf, 1600 + 8 * i, limit)
    for i, sm in enumerate(spec.sm_limits):
        _u64(buf, 1728 + 8 * i, sm)
    for k, proc in enumerate(spec.procs):
        slot = 1856 + 1960 * k
        _i32(buf, slot + 0, proc.pid)
        _i32(buf, slot + 4, proc.hostpid)
        for d, (ctx, mod, data, off, total) in proc.used.items():
            at = slot + 8 + 64 * d
            for j, value in enumerate((ctx, mod, data, off, total)):
                _u64(buf, at + 8 * j, value)
            buf[at + 40 : at + 64] = b"\x77" * 24  # unused[3]: must be ignored
        for d, value in proc.monitorused.items():
            _u64(buf, slot + 1032 + 8 * d, value)
        for d, (dec, enc, sm) in proc.util.items():
            at = slot + 1160 + 48 * d
            _u64(buf, at + 0, dec)
            _u64(buf, at + 8, enc)
            _u64(buf, at + 16, sm)
            buf[at + 24 : at + 48] = b"\x66" * 24  # unused[3]
        _i32(buf, slot + 1928, proc.status)
        _u64(buf, slot + 1936, proc.seqlock)
    _i32(buf, 2_008_896, len(spec.procs) if spec.proc_num is None else spec.proc_num)
    _i32(buf, 2_008_900, spec.utilization_switch)
    _i32(buf, 2_008_904, spec.recent_kernel)
    _i32(buf, 2_008_908, spec.priority)
    _u64(buf, 2_008_912, spec.last_kernel_time)
    buf[2_008_920:2_008_952] = b"\x33" * 32  # sem_postinit / unused
    return buf


def v0_bytes(spec: Spec) -> bytearray:
    buf = bytearray(V0_SIZE + 1)
    _i32(buf, 0, MAGIC)
    _i32(buf, 4, spec.sm_init_flag)
    _u64(buf, 8, spec.owner_pid)
    buf[16:48] = b"\x5a" * 32
    _u64(buf, 48, len(spec.uuids) if spec.device_num is None else spec.device_num)
    for i, uuid in enumerate(spec.uuids):
        _uuid(buf, 56 + 96 * i, uuid)
    for i, limit in enumerate(spec.limits):
        _u64(buf, 1592 + 8 * i, limit)
    for i, sm in enumerate(spec.sm_limits):
        _u64(buf, 1720 + 8 * i, sm)
    for k, proc in enumerate(spec.procs):
        slot = 1848 + 1168 * k
        _i32(buf, slot + 0, proc.pid)
        _i32(buf, slot + 4, proc.hostpid)
        for d, (ctx, mod, data, off, total) in proc.used.items():
            at = slot + 8 + 40 * d
            for j, value in enumerate((ctx, mod, data, off, total)):
                _u64(buf, at + 8 * j, value)
        for d, value in proc.monitorused.items():
            _u64(buf, slot + 648 + 8 * d, value)
        for d, (dec, enc, sm) in proc.util.items():
            at = slot + 776 + 24 * d
            _u64(buf, at + 0, dec)
            _u64(buf, at + 8, enc)
            _u64(buf, at + 16, sm)
        _i32(buf, slot + 1160, proc.status)
    _i32(buf, 1_197_880, len(spec.procs) if spec.proc_num is None else spec.proc_num)
    _i32(buf, 1_197_884, spec.utilization_switch)
    _i32(buf, 1_197_888, spec.recent_kernel)
    _i32(buf, 1_197_892, spec.priority)
    return buf


def write_region(directory: Path, data: bytes | bytearray, name: str = "3f2c9d1e.cache") -> Path:
    """A container directory as the plugin and HAMi-core leave it: the region file and the
    empty `libvgpu.so` bind-mount target."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "libvgpu.so").write_bytes(b"")
    path = directory / name
    path.write_bytes(bytes(data))
    return path


GIB = 1 << 30
MIB = 1 << 20
UUID_A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
UUID_B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"


def two_gpu_spec(**overrides: object) -> Spec:
    """Two devices, three processes: two live (one running, one swapped out), one exited."""
    spec = Spec(
        uuids=[UUID_A, UUID_B],
        limits=[3000 * MIB, 5 * GIB],
        sm_limits=[30, 0],
        procs=[
            Proc(
                pid=17,
                hostpid=90017,
                status=1,
                used={0: (300 * MIB, 20 * MIB, 700 * MIB, 2 * MIB, 1022 * MIB)},
                monitorused={0: 1030 * MIB},
                util={0: (1, 2, 35)},
            ),
            Proc(
                pid=18,
                hostpid=90018,
                status=2,
                used={
                    0: (100 * MIB, 0, 400 * MIB, 0, 500 * MIB),
                    1: (300 * MIB, 10 * MIB, 2 * GIB, 0, 310 * MIB + 2 * GIB),
                },
                util={0: (0, 0, 5), 1: (3, 4, 60)},
            ),
            Proc(
                pid=19,
                hostpid=0,
                status=0,
                used={0: (GIB, GIB, GIB, 0, 3 * GIB)},
                util={0: (0, 0, 99)},
            ),
        ],
        last_kernel_time=1_760_000_000,
        priority=0,
        recent_kernel=2,
        utilization_switch=1,
    )
    for key, value in overrides.items():
        setattr(spec, key, value)
    return spec
