"""Answers to the RMS-norm exercises.

* ``rms_norm_offset(x, weight, eps)``: Gemma's variant ``x̂ ⊙ (1 + w)``, with
  its weight stored as an offset from 1 (forward only).
* ``add_rms_norm(x, residual, weight, eps)``: the pre-norm block's
  ``h = x + residual; y = rms_norm(h)`` in one pass, returning ``(y, h)``.

``tests/rms_norm/test_exercises.py`` checks them against PyTorch.
"""

from __future__ import annotations

import academy  # noqa: F401
from academy.validation import check_forward_only, check_same

import torch
import triton
import triton.language as tl

from examples.norms.launch import FWD_MAX_FUSED_COLS, as_rows, tile_config
from examples.rms_norm.kernel import check_inputs


def _check_width(x: torch.Tensor) -> None:
    if x.shape[-1] > FWD_MAX_FUSED_COLS:
        raise ValueError(f"rows of {x.shape[-1]} values; this one-pass kernel takes at most {FWD_MAX_FUSED_COLS}")


# --8<-- [start:offset]
@triton.jit
def rms_norm_offset_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows64 * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    scale = 1.0 + tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)  # 1 + w in fp32
    y = x * rstd[:, None] * scale[None, :]
    tl.store(y_ptr + rows64 * n_cols + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm_offset(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / rms(x) ⊙ (1 + weight)`` over the last dimension (forward only)."""
    check_inputs(x, weight, eps)
    check_forward_only("rms_norm_offset", x=x, weight=weight)
    _check_width(x)
    x_rows = as_rows(x)
    n_rows, n_cols = x_rows.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows:
        config = tile_config(n_cols)
        rms_norm_offset_kernel[(triton.cdiv(n_rows, config["BLOCK_M"]),)](
            x_rows, weight.contiguous(), y, n_rows, n_cols, x_rows.stride(0), float(eps), **config
        )
    return y.view(x.shape)


# --8<-- [end:offset]


# --8<-- [start:add_rms_norm]
@triton.jit
def add_rms_norm_kernel(
    x_ptr,
    r_ptr,
    w_ptr,
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
    h = h.to(h_ptr.dtype.element_ty)  # stored in the input dtype, normalised as stored
    tl.store(h_ptr + offsets, h, mask=mask)
    h = h.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + offsets, (h * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


def add_rms_norm(x, residual, weight, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """``h = x + residual``, ``y = rms_norm(h, weight)``; returns ``(y, h)`` (forward only)."""
    check_inputs(x, weight, eps)
    check_same(x, residual, ("x", "residual"))
    check_forward_only("add_rms_norm", x=x, residual=residual, weight=weight)
    _check_width(x)
    x_rows = x.reshape(-1, x.shape[-1]).contiguous()
    r_rows = residual.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x_rows.shape
    y = torch.empty_like(x_rows)
    h = torch.empty_like(x_rows)
    if n_rows:
        config = tile_config(n_cols)
        add_rms_norm_kernel[(triton.cdiv(n_rows, config["BLOCK_M"]),)](
            x_rows, r_rows, weight.contiguous(), y, h, n_rows, n_cols, float(eps), **config
        )
    return y.view(x.shape), h.view(x.shape)


# --8<-- [end:add_rms_norm]
