"""Answers to the matmul chapter's exercises.

* ``matmul_backward(a, b, grad_c)``: the two gradients of ``C = A·B`` as two
  more calls of the chapter's op on transposed *views* (no copies): the
  column-major support is what makes this free.
* ``matmul_split_k_atomic(a, b, split_k)``: split-K whose slices add their
  partial sums into one fp32 buffer with ``tl.atomic_add`` instead of
  writing them out for a reduction pass.

``tests/matmul/test_exercises.py`` checks both against float64 PyTorch.
"""

from __future__ import annotations

from academy import INTERPRETED
from academy.validation import as_int, check_forward_only

import torch
import triton
import triton.language as tl

from examples.matmul.kernel import check_inputs, matmul


# --8<-- [start:matmul_backward]
def matmul_backward(a: torch.Tensor, b: torch.Tensor, grad_c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dL/da, dL/db)`` for ``c = a @ b``: ``grad_c @ bᵀ`` and ``aᵀ @ grad_c``."""
    if grad_c.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"grad_c must have shape {(a.shape[0], b.shape[1])}, got {tuple(grad_c.shape)}")
    grad_a = matmul(grad_c, b.T)  # b.T is a view: strides swapped, nothing copied
    grad_b = matmul(a.T, grad_c)
    return grad_a, grad_b


# --8<-- [end:matmul_backward]


# --8<-- [start:split_k_atomic]
@triton.jit
def split_k_atomic_kernel(
    a_ptr,
    b_ptr,
    acc_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_begin = tl.program_id(2) * K_PER_SPLIT
    k_end = tl.minimum(K, k_begin + K_PER_SPLIT)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(k_begin, k_end, BLOCK_K):
        k = k_start + ks
        a = tl.load(
            a_ptr + (rows % M).to(tl.int64)[:, None] * stride_am + k[None, :] * stride_ak,
            mask=k[None, :] < k_end,
            other=0.0,
        )
        b = tl.load(
            b_ptr + k[:, None] * stride_bk + (cols % N).to(tl.int64)[None, :] * stride_bn,
            mask=k[:, None] < k_end,
            other=0.0,
        )
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.atomic_add(
        acc_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], acc, mask=mask
    )  # the order of the adds varies


def matmul_split_k_atomic(a: torch.Tensor, b: torch.Tensor, split_k: int = 4) -> torch.Tensor:
    """``a @ b`` with K cut into ``split_k`` slices added by atomics into a zeroed fp32 buffer."""
    check_inputs(a, b, None, "auto")
    check_forward_only("matmul_split_k_atomic", a=a, b=b)
    if as_int("split_k", split_k) < 1:
        raise ValueError(f"split_k must be a positive int, got {split_k!r}")
    split_k = int(split_k)
    (M, K), N = a.shape, b.shape[1]
    acc = torch.zeros((M, N), dtype=torch.float32, device=a.device)  # atomics need a zeroed start
    if acc.numel() == 0 or K == 0:
        return acc.to(a.dtype)
    block_m, block_n, block_k = (16, 32, 32) if INTERPRETED else (16, 64, 128)
    k_per_split = triton.cdiv(triton.cdiv(K, split_k), block_k) * block_k
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n), triton.cdiv(K, k_per_split))
    split_k_atomic_kernel[grid](
        a,
        b,
        acc,
        M,
        N,
        K,
        k_per_split,
        *a.stride(),
        *b.stride(),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        UPCAST=INTERPRETED,
        PRECISION="ieee" if INTERPRETED or a.dtype == torch.float32 else None,
    )
    return acc.to(a.dtype)


# --8<-- [end:split_k_atomic]
