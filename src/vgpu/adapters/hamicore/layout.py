"""The byte layouts of HAMi-core's shared region, and decoding one from a buffer.

Two layouts exist (docs/monitor.md has the tables): layout 0, written by HAMi-core before it
had version fields, and layout 1 (versions 1.1 and 1.2, same bytes). Both are little-endian C
structs with natural alignment. A file is recognised as HAMi's monitor does: at least 12
bytes, the magic at offset 0, then layout 0 by size alone, else layout 1 when
`major_version` is 1 and the file is big enough.
"""

import mmap
import struct
from dataclasses import dataclass

from vgpu.ports.accounting import (
    DEVICE_SLOTS,
    DeviceMemory,
    DeviceUtilization,
    ProcessSlot,
    Region,
    RegionUnreadable,
)

MAGIC = 19920718
MAX_PROCESSES = 1024
UUID_BYTES = 96
HEADER = struct.Struct("<iII")  # initialized_flag, major_version, minor_version

Buffer = bytes | bytearray | memoryview | mmap.mmap


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each field the monitor uses sits in one layout; offsets from the file start."""

    number: int
    size: int
    device_count: int
    uuids: int
    limits: int
    sm_limits: int
    processes: int
    slot: struct.Struct
    memory_words: int  # uint64 words per device in a slot's `used` array
    util_words: int  # uint64 words per device in a slot's `device_util` array
    tail: int  # proc_num, utilization_switch, recent_kernel, priority (4 x int32)
    last_kernel_time: int | None

    @property
    def recent_kernel(self) -> int:
        return self.tail + 8

    @property
    def utilization_switch(self) -> int:
        return self.tail + 4


def _slot(memory_words: int, util_words: int, tail: str) -> struct.Struct:
    per_device = DEVICE_SLOTS
    return struct.Struct(
        f"<ii{per_device * memory_words}Q{per_device}Q{per_device * util_words}Q{tail}"
    )


LAYOUT_0 = Layout(
    number=0,
    size=1_197_896,
    device_count=48,
    uuids=56,
    limits=1592,
    sm_limits=1720,
    processes=1848,
    slot=_slot(5, 3, "i4x"),
    memory_words=5,
    util_words=3,
    tail=1_197_880,
    last_kernel_time=None,
)

LAYOUT_1 = Layout(
    number=1,
    size=2_008_952,
    device_count=56,
    uuids=64,
    limits=1600,
    sm_limits=1728,
    processes=1856,
    slot=_slot(8, 6, "i4x3Q"),
    memory_words=8,
    util_words=6,
    tail=2_008_896,
    last_kernel_time=2_008_912,
)

assert LAYOUT_0.slot.size == 1168 and LAYOUT_1.slot.size == 1960
assert LAYOUT_0.processes + MAX_PROCESSES * LAYOUT_0.slot.size == LAYOUT_0.tail
assert LAYOUT_1.processes + MAX_PROCESSES * LAYOUT_1.slot.size == LAYOUT_1.tail


def layout_of(buffer: Buffer, size: int) -> Layout:
    """The layout of a file of `size` bytes whose first bytes are `buffer`; RegionUnreadable
    says why when it has none."""
    if size < HEADER.size:
        raise RegionUnreadable(f"truncated: {size} bytes, not even the 12-byte header")
    magic, major, minor = HEADER.unpack_from(buffer)
    if magic != MAGIC:
        raise RegionUnreadable(f"wrong magic {magic} at offset 0 (expected {MAGIC})")
    if LAYOUT_0.size <= size < LAYOUT_1.size:
        return LAYOUT_0
    if major == 1 and size >= LAYOUT_1.size:
        return LAYOUT_1
    raise RegionUnreadable(
        f"unknown layout: {size} bytes, version {major}.{minor} (known: {LAYOUT_0.size}+ bytes "
        f"without version, or version 1.x with {LAYOUT_1.size}+ bytes)"
    )


def decode(buffer: Buffer, size: int) -> Region:
    """The region in `buffer` (a file of `size` bytes); RegionUnreadable if it is not one."""
    layout = layout_of(buffer, size)
    _, major, minor = HEADER.unpack_from(buffer) if layout.number else (0, 0, 0)
    (count,) = struct.unpack_from("<Q", buffer, layout.device_count)
    device_count = min(count, DEVICE_SLOTS)
    uuids = tuple(_uuid(buffer, layout.uuids + i * UUID_BYTES) for i in range(device_count))
    limits = struct.unpack_from(f"<{DEVICE_SLOTS}Q", buffer, layout.limits)
    sm_limits = struct.unpack_from(f"<{DEVICE_SLOTS}Q", buffer, layout.sm_limits)
    proc_num, switch, recent, priority = struct.unpack_from("<4i", buffer, layout.tail)
    in_use = min(max(proc_num, 0), MAX_PROCESSES)
    processes = tuple(
        _process(layout, layout.slot.unpack_from(buffer, layout.processes + k * layout.slot.size))
        for k in range(in_use)
    )
    last_kernel = 0
    if layout.last_kernel_time is not None:
        (last_kernel,) = struct.unpack_from("<Q", buffer, layout.last_kernel_time)
    return Region(
        layout=layout.number,
        major=major,
        minor=minor,
        device_count=device_count,
        uuids=uuids,
        limits=tuple(limits),
        sm_limits=tuple(sm_limits),
        processes=processes,
        utilization_switch=switch,
        recent_kernel=recent,
        priority=priority,
        last_kernel_time=last_kernel,
    )


def _uuid(buffer: Buffer, offset: int) -> str:
    raw = bytes(buffer[offset : offset + UUID_BYTES]).split(b"\0", 1)[0]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _process(layout: Layout, fields: tuple[int, ...]) -> ProcessSlot:
    pid, host_pid = fields[0], fields[1]
    at = 2
    memory = []
    for _ in range(DEVICE_SLOTS):
        context, module, data, offset, total = fields[at : at + 5]
        memory.append(DeviceMemory(context, module, data, offset, total))
        at += layout.memory_words
    monitor_used = fields[at : at + DEVICE_SLOTS]
    at += DEVICE_SLOTS
    utilization = []
    for _ in range(DEVICE_SLOTS):
        decoder, encoder, sm = fields[at : at + 3]
        utilization.append(DeviceUtilization(decoder, encoder, sm))
        at += layout.util_words
    return ProcessSlot(
        pid=pid,
        host_pid=host_pid,
        memory=tuple(memory),
        monitor_used=tuple(monitor_used),
        utilization=tuple(utilization),
        status=fields[at],
    )
