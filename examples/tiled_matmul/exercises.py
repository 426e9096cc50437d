"""Answers to the exercises of the tiling tutorial (tutorial 6, docs/tutorials/tiled_matmul.py).

* ``linear_bias_act(x, w, bias, activation)``: ``act(x @ w + bias)`` with the
  bias add fused into the epilogue (one store, no second pass over C);
* ``batched_matmul(a, b)``: a stack of independent matmuls on a 2-D grid,
  the second grid axis picking the matrix.

The autotuning tutorial's answers are in ``examples/autotuning/answers.py``.
``tests/tiled_matmul/test_exercises.py`` checks them against float64 PyTorch.
"""

from __future__ import annotations

from academy.validation import check_forward_only, check_tensor

import torch
import triton
import triton.language as tl

from examples.tiled_matmul.kernel import SUPPORTED_DTYPES, check_inputs, grouped_tile, launch_config, leaky_relu


# --8<-- [start:linear_bias_act]
@triton.jit
def linear_bias_act_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_bias,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    ACTIVATION: tl.constexpr,
):
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + (rows % M)[:, None] * stride_xm + ks[None, :] * stride_xk
    w_ptrs = w_ptr + ks[:, None] * stride_wk + (cols % N)[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs, mask=ks[None, :] < K - k_start, other=0.0)
        w = tl.load(w_ptrs, mask=ks[:, None] < K - k_start, other=0.0)
        acc = tl.dot(x, w, acc, input_precision="ieee")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    # The epilogue: one bias value per column, broadcast down the tile's rows.
    bias = tl.load(bias_ptr + cols * stride_bias, mask=cols < N, other=0.0).to(tl.float32)
    acc += bias[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(
        out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on, acc.to(out_ptr.dtype.element_ty), mask=mask
    )


def linear_bias_act(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, activation: str | None = None
) -> torch.Tensor:
    """``act(x @ w + bias)`` for x (M, K), w (K, N), bias (N,), in one kernel."""
    check_inputs(x, w, activation, 8, "ieee")
    check_tensor("bias", bias, SUPPORTED_DTYPES)
    check_forward_only("linear_bias_act", x=x, w=w, bias=bias)
    (M, K), N = x.shape, w.shape[1]
    if bias.shape != (N,) or bias.dtype != x.dtype:
        raise ValueError(f"bias must have shape ({N},) and dtype {x.dtype}, got {tuple(bias.shape)} {bias.dtype}")
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    meta = launch_config(x.dtype)
    grid = (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    linear_bias_act_kernel[grid](
        x,
        w,
        bias,
        out,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        w.stride(1),
        bias.stride(0),
        out.stride(0),
        out.stride(1),
        GROUP_SIZE_M=8,
        ACTIVATION=activation or "",
        **meta,
    )
    return out


# --8<-- [end:linear_bias_act]


# --8<-- [start:batched_matmul]
@triton.jit
def batched_matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_ab,
    stride_am,
    stride_ak,  # the batch stride comes first
    stride_bb,
    stride_bk,
    stride_bn,
    stride_cb,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    batch = tl.program_id(1).to(tl.int64)  # grid axis 1: which matrix of the stack
    a_ptr += batch * stride_ab
    b_ptr += batch * stride_bb
    c_ptr += batch * stride_cb
    # From here on, exactly the single-matrix kernel (without an epilogue).
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k_start, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k_start, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def batched_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for stacks a (B, M, K) and b (B, K, N): one launch, grid (tiles, B)."""
    check_tensor("a", a, SUPPORTED_DTYPES)
    check_tensor("b", b, SUPPORTED_DTYPES)
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"expected a (B, M, K) and b (B, K, N), got {tuple(a.shape)} and {tuple(b.shape)}")
    check_forward_only("batched_matmul", a=a, b=b)
    if a.dtype != b.dtype:
        raise TypeError(f"dtypes differ: a {a.dtype} vs b {b.dtype}")
    batch, M, K = a.shape
    N = b.shape[2]
    c = torch.empty((batch, M, N), dtype=a.dtype, device=a.device)
    if c.numel() == 0:
        return c
    if K == 0:
        return c.zero_()
    meta = launch_config(a.dtype)
    grid = (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), batch)
    batched_matmul_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), GROUP_SIZE_M=8, **meta)
    return c


# --8<-- [end:batched_matmul]
