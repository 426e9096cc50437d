"""Answers to the low-bit weight matmul chapter's exercises.

* ``locate(k, bits)``: which int32 word and which bit hold code ``k`` of a row.
* ``quantized_matmul_atomic(x, packed, split_k)``: split-K whose slices add
  their fp32 partial sums into one zeroed buffer with ``tl.atomic_add``.
* ``dequantize_to(packed, dtype)``: the dense weight written once (the
  chapter's slab kernel, one slab), for the alternative "dequantise, then cuBLAS".

``tests/quantized_matmul/test_exercises.py`` checks them against float64 PyTorch.
"""

from __future__ import annotations

from academy import INTERPRETED
from academy.validation import as_int, check_forward_only

import torch
import triton
import triton.language as tl

from examples.quantized_matmul.kernel import (
    QuantizedWeight,
    check_inputs,
    dequantize_columns,
    dequantize_tile,
    slab_config,
)


# --8<-- [start:locate]
def locate(k: int, bits: int) -> tuple[int, int]:
    """(word, bit) of code ``k`` in a packed row: word ``k // eps``, bit ``(k % eps)·bits``."""
    eps = 32 // bits
    return k // eps, (k % eps) * bits


# --8<-- [end:locate]


# --8<-- [start:split_k_atomic]
@triton.jit
def qmm_atomic_kernel(
    x_ptr,
    data_ptr,
    s_ptr,
    z_ptr,
    acc_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_xm,
    BITS: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    EPS: tl.constexpr = 32 // BITS
    WORDS: tl.constexpr = BLOCK_K // EPS
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    safe_cols = cols % N
    k_begin = tl.program_id(2) * K_PER_SPLIT
    k_end = tl.minimum(K, k_begin + K_PER_SPLIT)
    ks = tl.arange(0, BLOCK_K)
    words = tl.arange(0, WORDS)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(k_begin, k_end, BLOCK_K):
        packed = tl.load(
            data_ptr + (k_start // EPS + words).to(tl.int64)[:, None] * N + safe_cols[None, :],
            mask=(k_start + words * EPS < k_end)[:, None],
            other=0,
        )
        x = tl.load(
            x_ptr + (rows % M).to(tl.int64)[:, None] * stride_xm + (k_start + ks)[None, :],
            mask=(k_start + ks < k_end)[None, :],
            other=0.0,
        )
        meta = tl.cast(k_start // GROUP, tl.int64) * N + safe_cols  # (K/g)·N may pass 2**31
        s = tl.load(s_ptr + meta).to(tl.float32)
        z = tl.load(z_ptr + meta).to(tl.float32)
        w = tl.reshape(dequantize_tile(packed, s, z, BITS), (BLOCK_K, BLOCK_N))
        if UPCAST:
            acc = tl.dot(x.to(tl.float32), w, acc, input_precision="ieee")
        else:
            acc = tl.dot(x, w.to(x_ptr.dtype.element_ty), acc)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.atomic_add(acc_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], acc, mask=mask)  # any order


def quantized_matmul_atomic(x: torch.Tensor, packed: QuantizedWeight, split_k: int = 4) -> torch.Tensor:
    """``x @ dequantize(packed).T`` with K cut into ``split_k`` slices added by fp32 atomics."""
    check_inputs(x, packed, "auto")
    check_forward_only("quantized_matmul_atomic", x=x)
    if as_int("split_k", split_k) < 1:
        raise ValueError(f"split_k must be a positive int, got {split_k!r}")
    split_k = int(split_k)
    x = x.contiguous()
    (M, K), N = x.shape, packed.shape[0]
    acc = torch.zeros((M, N), dtype=torch.float32, device=x.device)  # atomics add into zeros
    block_m, block_n = (16, 16) if INTERPRETED else (16, 128)
    block_k = 32 if INTERPRETED or packed.per_channel else min(128, packed.group_size)
    k_per_split = triton.cdiv(triton.cdiv(K, split_k), block_k) * block_k
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n), triton.cdiv(K, k_per_split))
    qmm_atomic_kernel[grid](
        x,
        packed.data,
        packed.scales,
        packed.zeros,
        acc,
        M,
        N,
        K,
        k_per_split,
        x.stride(0),
        BITS=packed.bits,
        GROUP=packed.group_size,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        UPCAST=INTERPRETED,
    )
    return acc.to(x.dtype)


# --8<-- [end:split_k_atomic]


# --8<-- [start:dequantize_kernel]
def dequantize_to(packed: QuantizedWeight, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """The dense (N, K) weight in ``dtype``, written once: the chapter's slab kernel with one slab as wide as
    the weight. It writes Wᵀ (K, N) row-major, the B operand a matmul reads best; the result is its
    transposed view."""
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"dtype must be fp16, bf16 or fp32, got {dtype}")
    N, K = packed.shape
    out = torch.empty((K, N), dtype=dtype, device=packed.data.device)
    dequantize_columns(packed, 0, out, slab_config(N, K, out.element_size(), packed))
    return out.T


# --8<-- [end:dequantize_kernel]
