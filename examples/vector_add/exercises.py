"""Answers to the vector addition exercises.

* ``axpy(a, x, y)``: ``a·x + y`` in one pass over memory (one kernel instead
  of a multiply and an add).
* ``add_2d(x, y)``: ``x + y`` for two matrices with any strides (transposed,
  sliced), on a 2-D grid of tiles.

``tests/vector_add/test_exercises.py`` checks both against PyTorch.
"""

from __future__ import annotations

from academy.validation import as_real, check_forward_only, check_same, check_tensor

import torch
import triton
import triton.language as tl

from examples.vector_add.kernel import SUPPORTED_DTYPES, _flat_stride, check_inputs


# --8<-- [start:axpy]
@triton.jit
def axpy_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    a,  # a Python float: Triton passes it as an fp32 scalar
    n_elements,
    x_stride,
    y_stride,  # in elements
    BLOCK_SIZE: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets * x_stride, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets * y_stride, mask=mask).to(tl.float32)
    result = a * x + y  # one rounding at the end, in the output dtype
    tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def axpy(a: float, x: torch.Tensor, y: torch.Tensor, *, block_size: int = 1024) -> torch.Tensor:
    """``a * x + y`` for two tensors of one shape and dtype, read once each."""
    a = as_real("a", a)  # a Python or NumPy number
    check_inputs(x, y)  # the same rules as add(): device, dtype, shape, strides
    check_forward_only("axpy", x=x, y=y)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n_elements = x.numel()
    if n_elements == 0:
        return out
    grid = (triton.cdiv(n_elements, block_size),)
    axpy_kernel[grid](x, y, out, float(a), n_elements, _flat_stride(x), _flat_stride(y), BLOCK_SIZE=block_size)
    return out


# --8<-- [end:axpy]


# --8<-- [start:add_2d]
@triton.jit
def add_2d_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    x_col_stride,  # all strides in elements
    y_row_stride,
    y_col_stride,
    out_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    r, c = rows[:, None], cols[None, :]
    x = tl.load(x_ptr + r * x_row_stride + c * x_col_stride, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + r * y_row_stride + c * y_col_stride, mask=mask).to(tl.float32)
    tl.store(out_ptr + r * out_row_stride + c, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def add_2d(x: torch.Tensor, y: torch.Tensor, *, block_m: int = 32, block_n: int = 64) -> torch.Tensor:
    """``x + y`` for two 2-D tensors with any strides; the result is contiguous."""
    for name, t in (("x", x), ("y", y)):
        check_tensor(name, t, SUPPORTED_DTYPES)
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    check_forward_only("add_2d", x=x, y=y)
    check_same(x, y)
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    grid = (triton.cdiv(n_rows, block_m), triton.cdiv(n_cols, block_n))
    add_2d_kernel[grid](
        x,
        y,
        out,
        n_rows,
        n_cols,
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        out.stride(0),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
    )
    return out


# --8<-- [end:add_2d]
