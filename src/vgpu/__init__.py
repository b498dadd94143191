"""vgpu: GPU sharing for Kubernetes, HAMi-compatible, as a library and three processes."""

__version__ = "0.1.0"
