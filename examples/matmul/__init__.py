"""Matrix multiplication at cuBLAS speed: persistent TMA, split-K, fused epilogues (forward only)."""
