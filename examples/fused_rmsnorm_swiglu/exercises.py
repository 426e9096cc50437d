"""Answers to the fused RMSNorm + SwiGLU exercises.

* ``predicted_speedup(mode)``: the unfused pair's bytes over the fused
  kernel's, from the pass counts in ``bench.py``.
* ``rmsnorm_geglu(x, weight, eps)``: the same fusion with GeLU (tanh form) as
  the activation, forward only, halves up to ``MAX_ONE_PASS_HALF`` wide, reusing GeGLU's
  ``@triton.jit`` activation.

``tests/fused_rmsnorm_swiglu/test_exercises.py`` checks them.
"""

from __future__ import annotations

from fractions import Fraction

from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl

from examples.fused_rmsnorm_swiglu.bench import FUSED_PASSES, UNFUSED_PASSES
from examples.fused_rmsnorm_swiglu.kernel import MAX_ONE_PASS_HALF, _as_rows, check_inputs
from examples.geglu.kernel import gelu_tanh


# --8<-- [start:predicted_speedup]
def predicted_speedup(mode: str) -> Fraction:
    """Unfused bytes / fused bytes: 7/3 for the forward, 18/8 = 9/4 for forward+backward."""
    return Fraction(UNFUSED_PASSES[mode], FUSED_PASSES[mode])


# --8<-- [end:predicted_speedup]


# --8<-- [start:rmsnorm_geglu]
@triton.jit
def rmsnorm_geglu_kernel(x_ptr, w_ptr, out_ptr, n_half, x_row_stride, out_row_stride, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_half
    xa = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    xb = tl.load(x_ptr + row * x_row_stride + n_half + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt((tl.sum(xa * xa, axis=0) + tl.sum(xb * xb, axis=0)) / (2 * n_half) + eps)
    a = xa * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = xb * rstd * tl.load(w_ptr + n_half + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, (gelu_tanh(a) * b).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm_geglu(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``gelu_tanh(a) · b`` where ``[a, b] = rmsnorm(x) · weight`` (forward only)."""
    check_inputs(x, weight, eps)
    check_forward_only("rmsnorm_geglu", x=x, weight=weight)
    if x.shape[-1] // 2 > MAX_ONE_PASS_HALF:
        raise ValueError(f"rows of {x.shape[-1]} values; this one-pass answer takes at most {2 * MAX_ONE_PASS_HALF}")
    x_rows = _as_rows(x)
    n_rows, n_half = x_rows.shape[0], x_rows.shape[1] // 2
    out = torch.empty((n_rows, n_half), dtype=x.dtype, device=x.device)
    if n_rows:
        rmsnorm_geglu_kernel[(n_rows,)](
            x_rows,
            weight,
            out,
            n_half,
            x_rows.stride(0),
            out.stride(0),
            float(eps),
            BLOCK_N=triton.next_power_of_2(n_half),
        )
    return out.view(*x.shape[:-1], n_half)


# --8<-- [end:rmsnorm_geglu]
