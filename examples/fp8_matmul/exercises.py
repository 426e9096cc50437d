"""Answers to the FP8 matmul chapter's exercises.

* ``quantize_fp8_pow2(x, block)``: block scales rounded up to powers of two, so
  that multiplying a code by its scale is exact in any binary format.
* ``transpose_quantized(codes, scales)``: the quantised transpose of a weight in
  128 × 128 blocks, without quantising again (the backward pass multiplies by
  ``wᵀ``).
* ``quantization_error(x, block, dtype)``: the relative L2 error of a
  quantise-dequantise round trip, to compare e4m3 with e5m2.

``tests/fp8_matmul/test_exercises.py`` checks all three.
"""

from __future__ import annotations

import torch

from examples.fp8_matmul.kernel import dequantize_fp8, fp8_max, quantize_fp8


# --8<-- [start:pow2]
def quantize_fp8_pow2(
    x: torch.Tensor, block: tuple[int | None, int | None] = (1, 128), dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``quantize_fp8`` with each scale rounded up to a power of two: the block's largest magnitude
    then lands in [top/2, top] instead of exactly on top, one binade of range given up."""
    _, scales = quantize_fp8(x, block, dtype)
    mantissa, exponent = torch.frexp(scales)  # scales = mantissa · 2^exponent, mantissa in [1/2, 1)
    pow2 = torch.ldexp(torch.ones_like(scales), exponent - (mantissa == 0.5).int())  # (1)!
    bm, bk = (size or dim for size, dim in zip(block, x.shape))
    full = pow2.repeat_interleave(bm, dim=0).repeat_interleave(bk, dim=1)[: x.shape[0], : x.shape[1]]
    top = fp8_max(dtype)
    codes = (x.float() / full).clamp(-top, top).to(dtype)  # (2)!
    return codes, pow2


# --8<-- [end:pow2]


# --8<-- [start:transpose]
def transpose_quantized(codes: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``quantize_fp8(w.T, (128, 128))`` from ``quantize_fp8(w, (128, 128))``: a square block holds the
    same values either way round, so it keeps its scale, and the codes only move."""
    return codes.T.contiguous(), scales.T.contiguous()


# --8<-- [end:transpose]


# --8<-- [start:format_error]
def quantization_error(
    x: torch.Tensor, block: tuple[int | None, int | None], dtype: torch.dtype = torch.float8_e4m3fn
) -> float:
    """‖dequant(quant(x)) − x‖ / ‖x‖ in float64."""
    codes, scales = quantize_fp8(x, block, dtype)
    error = dequantize_fp8(codes, scales, block) - x.double()
    return (torch.linalg.vector_norm(error) / torch.linalg.vector_norm(x.double())).item()


# --8<-- [end:format_error]
