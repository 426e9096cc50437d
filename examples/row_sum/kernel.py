"""Row sums of a matrix whose rows may be far wider than one block.

``row_sum(x)`` equals ``x.sum(dim=-1)`` for a 2-D fp32, fp16 or bf16 tensor:
the sum is accumulated in fp32 and returned in ``x``'s dtype, as PyTorch does.
One program owns one row and walks along it a tile at a time, so a row of a
million values needs no more registers than a row of a thousand.

Run this file (``python -m examples.row_sum.kernel``) for a quick check.
"""

from __future__ import annotations

from academy import DEVICE
from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl


# --8<-- [start:reference]
def reference(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dimension, accumulated in fp32, returned in ``x``'s dtype."""
    return x.float().sum(dim=-1).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:kernel]
@triton.jit
def row_sum_kernel(
    x_ptr,
    out_ptr,
    n_cols,
    x_row_stride,  # in elements
    BLOCK_N: tl.constexpr,  # the tile: a power of two, usually narrower than the row
):
    row = tl.program_id(0).to(tl.int64)  # (1)!
    x_row = x_ptr + row * x_row_stride
    partial = tl.zeros([BLOCK_N], dtype=tl.float32)  # (2)!
    for start in range(0, n_cols, BLOCK_N):  # (3)!
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)  # (4)!
        partial += x.to(tl.float32)  # (5)!
    total = tl.sum(partial, axis=0)  # (6)!
    tl.store(out_ptr + row, total.to(out_ptr.dtype.element_ty))


# --8<-- [end:kernel]


# --8<-- [start:launcher]
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK_N = 4096
"""Widest tile: 4096 fp32 partial sums are 16 registers per thread at 8 warps."""


def launch_config(n_cols: int) -> dict[str, int]:
    block_n = min(triton.next_power_of_2(n_cols), MAX_BLOCK_N)  # (1)!
    num_warps = min(8, max(1, block_n // 512))  # (2)!
    return {"BLOCK_N": block_n, "num_warps": num_warps}


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """``x.sum(dim=-1)`` for a 2-D tensor whose rows have unit stride; forward only (with autograd
    recording, an ``x`` that requires grad is refused: the result would carry no gradient)."""
    check_inputs(x)
    check_forward_only("row_sum", x=x)
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return out
    if n_cols == 0:  # the empty sum is 0, and a kernel would have nothing to read
        return out.fill_(0)
    row_sum_kernel[(n_rows,)](x, out, n_cols, x.stride(0), **launch_config(n_cols))  # (3)!
    return out


def check_inputs(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != DEVICE:
        raise ValueError(f"x is on {x.device}, but kernels run on {DEVICE!r} here")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; supported: {SUPPORTED_DTYPES}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows, columns), got shape {tuple(x.shape)}")
    if x.shape[1] > 1 and x.stride(1) != 1:  # (4)!
        raise ValueError(f"x's columns must be adjacent in memory (stride 1), got strides {x.stride()}")
    if x.shape[0] > 2**31 - 1:
        raise ValueError(f"x has {x.shape[0]} rows; at most 2**31 - 1 are supported (one program each)")


# --8<-- [end:launcher]


if __name__ == "__main__":
    for n_cols in (1000, 3 * MAX_BLOCK_N + 77):  # one tile, then a loop of four tiles
        x = torch.randn(6, n_cols, device=DEVICE)
        expected = x.double().sum(-1)
        error = ((row_sum(x) - expected).norm() / expected.norm()).item()
        print(f"row_sum on {DEVICE}, 6×{n_cols}: relative L2 error {error:.1e}")
        assert error < 1e-5
