"""NVML adapter (pynvml): the node's GPUs and their health; implements GpuPort."""

from vgpu.adapters.nvml.gpus import NvmlGpus
from vgpu.adapters.nvml.xids import APPLICATION_XIDS, XidFilter, xid_filter_from_env

__all__ = ["APPLICATION_XIDS", "NvmlGpus", "XidFilter", "xid_filter_from_env"]
