"""`vgpu device-plugin`: the per-node daemon the kubelet talks to (HAMi's device plugin)."""
