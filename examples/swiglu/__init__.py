"""Chapter: SwiGLU, silu(gate)·up, and the gated element-wise layer GeGLU shares."""
