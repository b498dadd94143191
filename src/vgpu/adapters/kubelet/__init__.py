"""Kubelet device-plugin gRPC adapter: implements KubeletPort (see plugin.KubeletPlugin), and
KubeletCheckpointPort (the kubelet's device checkpoint file, checkpoint.KubeletCheckpoint)."""

from vgpu.adapters.kubelet.checkpoint import KubeletCheckpoint
from vgpu.adapters.kubelet.plugin import KubeletPlugin

__all__ = ["KubeletCheckpoint", "KubeletPlugin"]
