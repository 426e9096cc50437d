"""Chapter: GeGLU, gelu(gate)·up (exact erf and tanh forms) on the gated layer of examples/swiglu."""
