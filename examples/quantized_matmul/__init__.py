"""Low-bit weight matmul: int4/int8 weights packed in int32, dequantised in registers (forward only)."""
