"""Grouped GEMM for mixture-of-experts layers: every expert's rows times that expert's weight, in one launch."""
