"""Chapter: fused RMSNorm + SwiGLU, one kernel from x to silu(a)·b."""
