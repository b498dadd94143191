"""`vgpu dra-driver`: the kubelet DRA plugin for memory and compute slices of a node's GPUs."""
