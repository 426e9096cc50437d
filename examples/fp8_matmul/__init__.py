"""FP8 matmul with block scales: fp8 operands on the tensor cores, scales applied to fp32 partial sums."""
