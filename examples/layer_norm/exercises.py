"""Answers to the layer-norm exercises.

* ``add_layer_norm(x, residual, weight, bias, eps)``: the pre-norm block's
  ``h = x + residual; y = layer_norm(h)`` in one pass, returning ``(y, h)``
  (one read of each input, one write of each output instead of an extra
  round trip of ``h``).
* ``welford_row_stats(x)``: each row's mean and variance from a chunk loop
  that merges per-chunk statistics with Chan's formula, as the chapter's
  chunked forward does for rows too wide for registers.

``tests/layer_norm/test_exercises.py`` checks them against PyTorch.
"""

from __future__ import annotations

import academy  # noqa: F401
from academy.validation import check_forward_only, check_same

import torch
import triton
import triton.language as tl

from examples.layer_norm.kernel import check_inputs
from examples.norms.launch import FWD_MAX_FUSED_COLS, as_rows, tile_config


# --8<-- [start:add_layer_norm]
@triton.jit
def add_layer_norm_kernel(
    x_ptr,
    r_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    h_ptr,
    n_rows,
    n_cols,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]  # contiguous rows
    h = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32) + tl.load(
        r_ptr + offsets, mask=mask, other=0.0
    ).to(tl.float32)
    h = h.to(h_ptr.dtype.element_ty)  # the residual stream is stored in the input dtype ...
    tl.store(h_ptr + offsets, h, mask=mask)
    h = h.to(tl.float32)  # ... and normalised as stored, as PyTorch's unfused pair does
    mean = tl.sum(h, axis=1) / n_cols
    centered = tl.where(mask, h - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    y = centered * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def add_layer_norm(x, residual, weight, bias, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """``h = x + residual``, ``y = layer_norm(h)``; returns ``(y, h)`` (forward only)."""
    check_inputs(x, weight, bias, eps)
    check_same(x, residual, ("x", "residual"))
    check_forward_only("add_layer_norm", x=x, residual=residual, weight=weight, bias=bias)
    if bias is None:
        raise ValueError("add_layer_norm needs a bias")
    if x.shape[-1] > FWD_MAX_FUSED_COLS:
        raise ValueError(f"rows of {x.shape[-1]} values; this one-pass kernel takes at most {FWD_MAX_FUSED_COLS}")
    x_rows = x.reshape(-1, x.shape[-1]).contiguous()
    r_rows = residual.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x_rows.shape
    y = torch.empty_like(x_rows)
    h = torch.empty_like(x_rows)
    if n_rows:
        config = tile_config(n_cols)
        add_layer_norm_kernel[(triton.cdiv(n_rows, config["BLOCK_M"]),)](
            x_rows, r_rows, weight.contiguous(), bias.contiguous(), y, h, n_rows, n_cols, float(eps), **config
        )
    return y.view(x.shape), h.view(x.shape)


# --8<-- [end:add_layer_norm]


# --8<-- [start:welford]
@triton.jit
def welford_row_stats_kernel(
    x_ptr,
    mean_ptr,
    var_ptr,
    n_cols,
    x_row_stride,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    count = 0.0
    mean = 0.0
    m2 = 0.0  # Σ (x − mean)² over the values seen so far
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        n_chunk = tl.minimum(n_cols - start, BLOCK_N).to(tl.float32)
        chunk_mean = tl.sum(x, axis=0) / n_chunk
        chunk_m2 = tl.sum(tl.where(mask, (x - chunk_mean) * (x - chunk_mean), 0.0), axis=0)
        total = count + n_chunk
        delta = chunk_mean - mean
        mean = mean + delta * (n_chunk / total)  # Chan et al.: merge two (count, mean, M2) triples
        m2 = m2 + chunk_m2 + delta * delta * (count * n_chunk / total)
        count = total
    tl.store(mean_ptr + row, mean)
    tl.store(var_ptr + row, m2 / count)


def welford_row_stats(x: torch.Tensor, block_n: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's mean and (biased) variance in fp32, for rows of any width."""
    check_inputs(x, torch.empty(x.shape[-1:], dtype=x.dtype, device=x.device), None, 0.0)
    check_forward_only("welford_row_stats", x=x)
    x_rows = as_rows(x)
    n_rows, n_cols = x_rows.shape
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    var = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    if n_rows:
        welford_row_stats_kernel[(n_rows,)](x_rows, mean, var, n_cols, x_rows.stride(0), BLOCK_N=block_n)
    return mean.view(x.shape[:-1]), var.view(x.shape[:-1])


# --8<-- [end:welford]
