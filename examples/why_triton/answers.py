"""Answers to the exercises of "Why Triton" (docs/tutorials/why_triton.py).

``tests/why_triton/test_answers.py`` runs them under the interpreter on
a CPU (and compiled on a GPU) against PyTorch.
"""

from __future__ import annotations

from academy.validation import check_same, check_tensor

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check(x: torch.Tensor, y: torch.Tensor) -> None:
    for name, t in (("x", x), ("y", y)):
        check_tensor(name, t, SUPPORTED_DTYPES)
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous; pass {name}.contiguous()")
    check_same(x, y)


# --8<-- [start:grid_stride]
@triton.jit
def add_grid_stride_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    n_blocks = tl.cdiv(n_elements, BLOCK_SIZE)
    # The CUDA grid-stride loop, one level up: program pid takes blocks
    # pid, pid + n_programs, pid + 2 * n_programs, ... until the data runs out.
    for block in range(pid, n_blocks, n_programs):
        offsets = tl.cast(block, tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)


def add_grid_stride(x: torch.Tensor, y: torch.Tensor, n_programs: int = 4, block_size: int = 256) -> torch.Tensor:
    """``x + y`` with a fixed number of programs, whatever the size (a "persistent" grid)."""
    _check(x, y)
    if n_programs < 1:
        raise ValueError(f"n_programs must be positive, got {n_programs}")
    out = torch.empty_like(x)
    if x.numel():
        add_grid_stride_kernel[(n_programs,)](x, y, out, x.numel(), BLOCK_SIZE=block_size)
    return out


# --8<-- [end:grid_stride]


# --8<-- [start:add_relu]
@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(total, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


def add_relu(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    """``relu(x + y)`` in one pass: the sum never goes back to memory."""
    _check(x, y)
    out = torch.empty_like(x)
    if x.numel():
        add_relu_kernel[(triton.cdiv(x.numel(), block_size),)](x, y, out, x.numel(), BLOCK_SIZE=block_size)
    return out


def bytes_unfused(n: int, element_bytes: int) -> int:
    """torch.relu(x + y): the add reads 2 and writes 1, the relu reads 1 and writes 1."""
    return 5 * n * element_bytes


def bytes_fused(n: int, element_bytes: int) -> int:
    """add_relu: read x and y, write the result."""
    return 3 * n * element_bytes


# --8<-- [end:add_relu]
