"""HAMi-core's shared regions on the host (mmap + struct): implements AccountingPort."""

from vgpu.adapters.hamicore.regions import HamiCoreRegions

__all__ = ["HamiCoreRegions"]
