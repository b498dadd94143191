"""`vgpu explain`: why a GPU pod is Pending, and what would make it fit."""
