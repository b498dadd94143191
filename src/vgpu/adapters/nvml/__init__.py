"""NVML adapter (pynvml): implements GpuPort."""
