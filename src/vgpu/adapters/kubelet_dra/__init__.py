"""The kubelet's DRA plugin protocol over gRPC: implements DraKubeletPort (see
plugin.DraKubeletPlugin): registration, DRAPlugin v1 and v1beta1, and DRAResourceHealth."""

from vgpu.adapters.kubelet_dra.plugin import DraKubeletPlugin, registration_socket_name
from vgpu.adapters.kubelet_dra.servicer import SUPPORTED_VERSIONS

__all__ = ["SUPPORTED_VERSIONS", "DraKubeletPlugin", "registration_socket_name"]
