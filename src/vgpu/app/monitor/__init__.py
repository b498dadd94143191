"""`vgpu monitor`: per-container GPU usage from HAMi-core's shared regions, as HAMi's metrics."""
