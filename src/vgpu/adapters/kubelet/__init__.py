"""Kubelet device-plugin gRPC adapter: implements KubeletPort."""
