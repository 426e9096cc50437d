"""Answers to the reduction exercises.

* ``row_max(x)``: the row sum's loop with another operator; the masked lanes
  and the accumulator start at the operator's identity, −∞, not 0.
* ``row_rms(x)``: √(mean of x²) per row, the denominator of RMSNorm: the
  same tile loop, squaring before accumulating.

``tests/row_sum/test_exercises.py`` checks both against float64 PyTorch.
"""

from __future__ import annotations

from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl

from examples.row_sum.kernel import check_inputs, launch_config


# --8<-- [start:row_max]
@triton.jit
def row_max_kernel(x_ptr, out_ptr, n_cols, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    partial = tl.full([BLOCK_N], -float("inf"), dtype=tl.float32)  # the identity of max
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))  # 0 would win over negatives
        partial = tl.maximum(partial, x.to(tl.float32))
    tl.store(out_ptr + row, tl.max(partial, axis=0).to(out_ptr.dtype.element_ty))


def row_max(x: torch.Tensor) -> torch.Tensor:
    """``x.amax(dim=-1)`` for a 2-D tensor with at least one column."""
    check_inputs(x)
    check_forward_only("row_max", x=x)
    if x.shape[1] == 0:
        raise ValueError("the maximum of an empty row is undefined")
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    if n_rows:
        row_max_kernel[(n_rows,)](x, out, n_cols, x.stride(0), **launch_config(n_cols))
    return out


# --8<-- [end:row_max]


# --8<-- [start:row_rms]
@triton.jit
def row_rms_kernel(x_ptr, out_ptr, n_cols, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    partial = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)  # square in fp32
        partial += x * x
    mean_square = tl.sum(partial, axis=0) / n_cols
    tl.store(out_ptr + row, tl.sqrt(mean_square).to(out_ptr.dtype.element_ty))


def row_rms(x: torch.Tensor) -> torch.Tensor:
    """``x.pow(2).mean(-1).sqrt()`` per row, accumulated in fp32, returned in ``x``'s dtype."""
    check_inputs(x)
    check_forward_only("row_rms", x=x)
    if x.shape[1] == 0:
        raise ValueError("the mean of an empty row is undefined")
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    if n_rows:
        row_rms_kernel[(n_rows,)](x, out, n_cols, x.stride(0), **launch_config(n_cols))
    return out


# --8<-- [end:row_rms]
