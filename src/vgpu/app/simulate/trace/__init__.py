"""`vgpu simulate --trace`: replay a GPU-sharing trace (Alibaba's openb) under the FGD paper's
protocol and compare placement policies by the GPU they allocate. See docs/simulate.md."""
