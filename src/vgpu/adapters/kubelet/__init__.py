"""Kubelet device-plugin gRPC adapter: implements KubeletPort (see plugin.KubeletPlugin)."""

from vgpu.adapters.kubelet.plugin import KubeletPlugin

__all__ = ["KubeletPlugin"]
