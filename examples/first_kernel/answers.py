"""Answers to the exercises of "Your first kernel, run on a CPU"."""

from __future__ import annotations

from academy.validation import check_tensor

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# --8<-- [start:scale]
@triton.jit
def scale_kernel(x_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x).to(out_ptr.dtype.element_ty), mask=mask)


def scale(x: torch.Tensor, alpha: float, block_size: int = 1024) -> torch.Tensor:
    """``alpha * x`` for a contiguous tensor: one program per block, the tail masked."""
    check_tensor("x", x, SUPPORTED_DTYPES)
    if not x.is_contiguous():
        raise ValueError("x must be contiguous: the kernel walks it as one flat run of elements")
    out = torch.empty_like(x)
    if x.numel():
        grid = (triton.cdiv(x.numel(), block_size),)
        scale_kernel[grid](x, out, float(alpha), x.numel(), BLOCK_SIZE=block_size)
    return out


# --8<-- [end:scale]


# --8<-- [start:floor_grid]
def elements_left_unwritten(n_elements: int, block_size: int) -> int:
    """How many elements a grid of ``n_elements // block_size`` programs never touches."""
    covered = (n_elements // block_size) * block_size
    return n_elements - covered


# --8<-- [end:floor_grid]
