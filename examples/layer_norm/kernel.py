"""Layer norm over the last dimension, forward and backward, with dW and dB.

``layer_norm(x, weight, bias, eps)`` equals ``F.layer_norm(x, (N,), weight,
bias, eps)`` for fp32, fp16 and bf16 inputs of shape ``(..., N)`` and is
differentiable with respect to all three tensors.

* Forward: each program normalises one tile of rows in registers (one read
  of x, one write of y). Rows wider than ``FWD_MAX_FUSED_COLS`` take a
  chunked two-pass kernel, which merges each chunk's mean and centred sum of
  squares into the row's (Chan et al.): nothing cancels, whatever the row holds.
* Backward: one kernel computes dx row by row and, in the same pass, sums
  ``dy·x̂`` and ``dy`` over the rows each program owns, in fp32 registers;
  each program writes one partial row, and a second small kernel adds the
  partial rows. No locks, no atomics, nothing written in place. Rows wider
  than ``MAX_FUSED_COLS`` split the backward by columns instead.

The launch rules and the partial-row reduction are shared with the RMSNorm
chapter (``examples/norms/launch.py``).

Run this file (``python -m examples.layer_norm.kernel``) for a quick check.
"""

from __future__ import annotations

import academy  # noqa: F401  (sets TRITON_INTERPRET on CPU before triton loads)
from academy import DEVICE
from academy.validation import once_differentiable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from examples.norms import launch as norm_launch
from examples.norms.launch import (
    as_rows,
    backward_launch,
    column_split,
    forward_launch,
    sum_partials,
)


# --8<-- [start:reference]
def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch's layer norm computed in fp32, returned in x's dtype."""
    n = x.shape[-1]
    b = None if bias is None else bias.float()
    return F.layer_norm(x.float(), (n,), weight.float(), b, eps).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:forward_kernel]
@triton.jit
def layer_norm_forward_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,  # in elements
    eps,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,  # rows per tile, one tile per program
    BLOCK_N: tl.constexpr,  # next power of two ≥ n_cols: the whole row
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # (2)!
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    row_offsets = rows.to(tl.int64)[:, None]  # (3)!

    x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)  # (4)!
    mean = tl.sum(x, axis=1) / n_cols  # (5)!
    centered = tl.where(mask, x - mean[:, None], 0.0)  # (6)!
    var = tl.sum(centered * centered, axis=1) / n_cols  # (7)!
    rstd = tl.rsqrt(var + eps)  # (8)!
    tl.store(mean_ptr + rows, mean, mask=row_mask)  # (9)!
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)

    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last")  # (1)!
    y = centered * rstd[:, None] * w.to(tl.float32)[None, :]  # (10)!
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)[None, :]
    tl.store(y_ptr + row_offsets * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:forward_kernel]


# --8<-- [start:wide_forward_kernel]
@triton.jit
def layer_norm_forward_wide_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,
    eps,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,  # a chunk of the row; the row is wider
):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_row_stride

        # Pass 1: each chunk's mean and centred sum of squares, merged into the row's running pair.
        mean = 0.0
        m2 = 0.0  # Σ (x − mean)² over the columns merged so far
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)  # (1)!
            count = tl.minimum(n_cols - start, BLOCK_N).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / count
            d = tl.where(mask, x - chunk_mean, 0.0)  # (2)!
            seen = tl.cast(start, tl.float32)  # columns merged before this chunk
            delta = chunk_mean - mean
            mean += delta * (count / (seen + count))  # (3)!
            m2 += tl.sum(d * d, axis=0) + delta * delta * (seen * count / (seen + count))
        rstd = tl.rsqrt(m2 / n_cols + eps)
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)

        # Pass 2: read the row again (mostly from L2) and write y.
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = (x - mean) * rstd * w
            if HAS_BIAS:
                y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:wide_forward_kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def layer_norm_backward_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    mean_ptr,
    rstd_ptr,
    dw_partial_ptr,
    db_partial_ptr,  # fp32 (num_programs, n_cols): one row per program
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK_M  # rows between one tile of this program and its next
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)  # (1)!
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    row_offsets = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=0.0)  # (2)!
    dy = tl.load(dy_ptr + row_offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0)
    for start in range(pid * BLOCK_M, n_rows, step):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        row_offsets = rows.to(tl.int64)[:, None]
        next_mask = (rows + step < n_rows)[:, None] & col_mask[None, :]
        next_offsets = row_offsets + step
        x_next = tl.load(x_ptr + next_offsets * x_row_stride + cols[None, :], mask=next_mask, other=0.0)  # (3)!
        dy_next = tl.load(dy_ptr + next_offsets * dy_row_stride + cols[None, :], mask=next_mask, other=0.0)
        mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)  # (4)!
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)

        xhat = tl.where(mask, (x.to(tl.float32) - mean[:, None]) * rstd[:, None], 0.0)  # (5)!
        wdy = dy.to(tl.float32) * w[None, :]  # (6)!
        c1 = tl.sum(xhat * wdy, axis=1) / n_cols  # (7)!
        c2 = tl.sum(wdy, axis=1) / n_cols  # (8)!
        dx = (wdy - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]  # (9)!
        tl.store(dx_ptr + row_offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)

        dw_acc += dy.to(tl.float32) * xhat  # (10)!
        db_acc += dy.to(tl.float32)
        x = x_next
        dy = dy_next

    partial_offsets = pid.to(tl.int64) * n_cols + cols
    tl.store(dw_partial_ptr + partial_offsets, tl.sum(dw_acc, axis=0), mask=col_mask)  # (11)!
    if HAS_BIAS:
        tl.store(db_partial_ptr + partial_offsets, tl.sum(db_acc, axis=0), mask=col_mask)


# --8<-- [end:backward_kernel]


# --8<-- [start:wide_backward_kernel]
@triton.jit
def layer_norm_backward_wide_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    mean_ptr,
    rstd_ptr,
    dw_partial_ptr,
    db_partial_ptr,  # fp32 (num_programs, n_cols), zero-filled
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    dw_row = dw_partial_ptr + pid.to(tl.int64) * n_cols
    db_row = db_partial_ptr + pid.to(tl.int64) * n_cols
    for row in range(pid, n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        dy_row = dy_ptr + tl.cast(row, tl.int64) * dy_row_stride
        dx_row = dx_ptr + tl.cast(row, tl.int64) * dx_row_stride
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)

        # Pass 1: the two row means c1 and c2, chunk by chunk.
        lane_c1 = tl.zeros([BLOCK_N], tl.float32)
        lane_c2 = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = tl.where(mask, (x - mean) * rstd, 0.0)
            lane_c1 += xhat * dy * w
            lane_c2 += dy * w
        c1 = tl.sum(lane_c1, axis=0) / n_cols
        c2 = tl.sum(lane_c2, axis=0) / n_cols

        # Pass 2: dx, and this row's share of dW and dB added to the program's own partial row.
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = tl.where(mask, (x - mean) * rstd, 0.0)
            dx = (dy * w - (xhat * c1 + c2)) * rstd
            tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + cols, mask=mask, other=0.0)  # (1)!
            tl.store(dw_row + cols, dw + dy * xhat, mask=mask)
            if HAS_BIAS:
                db = tl.load(db_row + cols, mask=mask, other=0.0)
                tl.store(db_row + cols, db + dy, mask=mask)


# --8<-- [end:wide_backward_kernel]


# --8<-- [start:column_backward_kernels]
@triton.jit
def layer_norm_backward_row_terms_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    mean_ptr,
    rstd_ptr,
    c1_ptr,
    c2_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    BLOCK_N: tl.constexpr,
):
    """Stage 1 of the column-split backward: each row's c1 and c2 (fp32)."""
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        dy_row = dy_ptr + tl.cast(row, tl.int64) * dy_row_stride
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        lane_c1 = tl.zeros([BLOCK_N], tl.float32)
        lane_c2 = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            wdy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32) * tl.load(
                w_ptr + cols, mask=mask, other=0.0
            ).to(tl.float32)
            lane_c1 += tl.where(mask, (x - mean) * rstd, 0.0) * wdy
            lane_c2 += wdy
        tl.store(c1_ptr + row, tl.sum(lane_c1, axis=0) / n_cols)
        tl.store(c2_ptr + row, tl.sum(lane_c2, axis=0) / n_cols)


@triton.jit
def layer_norm_backward_columns_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    mean_ptr,
    rstd_ptr,
    c1_ptr,
    c2_ptr,
    dw_partial_ptr,
    db_partial_ptr,  # fp32 (n_groups, n_cols)
    n_rows,
    n_cols,
    rows_per_group,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Stage 2: program (g, j) owns rows of group g and columns of strip j: dx there,
    and the strip's partial dW/dB over the group's rows, in registers."""
    group = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], tl.float32)
    db_acc = tl.zeros([BLOCK_N], tl.float32)
    first = group * rows_per_group
    last = tl.minimum(first + rows_per_group, n_rows)
    for start in range(first, last, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < last
        mask = row_mask[:, None] & col_mask[None, :]
        row_offsets = rows.to(tl.int64)[:, None]
        x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        c1 = tl.load(c1_ptr + rows, mask=row_mask, other=0.0)
        c2 = tl.load(c2_ptr + rows, mask=row_mask, other=0.0)
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        dx = (dy * w[None, :] - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
        tl.store(dx_ptr + row_offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += tl.sum(dy * xhat, axis=0)
        db_acc += tl.sum(dy, axis=0)
    partial_offsets = group.to(tl.int64) * n_cols + cols
    tl.store(dw_partial_ptr + partial_offsets, dw_acc, mask=col_mask)
    if HAS_BIAS:
        tl.store(db_partial_ptr + partial_offsets, db_acc, mask=col_mask)


# --8<-- [end:column_backward_kernels]


# --8<-- [start:limits]
FWD_MAX_WARPS = 8
"""Most warps per forward program: more made this forward slower at 4 096 and 8 192 columns on an H100."""
MAX_FUSED_COLS = 8192
"""Widest row the backward holds in registers; wider rows take the column-split backward."""
# --8<-- [end:limits]


# --8<-- [start:launcher]
def check_inputs(x, weight, bias, eps) -> None:
    norm_launch.check_inputs("layer norm", x, eps, weight=weight, bias=bias)  # (1)!


def _forward(x, weight, bias, eps):
    x_rows = as_rows(x)
    n_rows, n_cols = x_rows.shape
    weight = weight.contiguous()
    bias = None if bias is None else bias.contiguous()
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)  # (2)!
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    in_registers, grid, config = forward_launch(n_rows, n_cols, FWD_MAX_WARPS)  # (3)!
    kernel = layer_norm_forward_kernel if in_registers else layer_norm_forward_wide_kernel
    kernel[(grid,)](
        x_rows,
        weight,
        weight if bias is None else bias,
        y,
        mean,
        rstd,
        n_rows,
        n_cols,
        x_rows.stride(0),
        y.stride(0),
        float(eps),
        HAS_BIAS=bias is not None,
        **config,
    )
    return y.view(x.shape), x_rows, mean, rstd


def _backward(dy, x_rows, weight, has_bias, mean, rstd):
    dy_rows = as_rows(dy)
    n_rows, n_cols = x_rows.shape
    dx = torch.empty((n_rows, n_cols), dtype=x_rows.dtype, device=x_rows.device)  # (4)!
    design, programs, config = backward_launch(n_rows, n_cols, MAX_FUSED_COLS)
    if design == "columns":
        dw_partial, db_partial = _backward_columns(dy_rows, x_rows, weight, has_bias, mean, rstd, dx, programs, config)
    else:
        # the in-register kernel writes its whole partial row; the "rows" kernel adds into it
        make_partials = torch.empty if design == "registers" else torch.zeros
        dw_partial = make_partials((programs, n_cols), dtype=torch.float32, device=x_rows.device)  # (5)!
        db_partial = (
            make_partials((programs, n_cols), dtype=torch.float32, device=x_rows.device) if has_bias else dw_partial
        )
        kernel = layer_norm_backward_kernel if design == "registers" else layer_norm_backward_wide_kernel
        kernel[(programs,)](
            x_rows,
            weight,
            dy_rows,
            dx,
            mean,
            rstd,
            dw_partial,
            db_partial,
            n_rows,
            n_cols,
            x_rows.stride(0),
            dy_rows.stride(0),
            dx.stride(0),
            HAS_BIAS=has_bias,
            **config,
        )
    dw = sum_partials(dw_partial, weight.dtype)
    db = sum_partials(db_partial, weight.dtype) if has_bias else None
    return dx, dw, db


def _backward_columns(dy_rows, x_rows, weight, has_bias, mean, rstd, dx, programs, config):
    """Wide rows: per-row c1, c2 first (on ``programs`` persistent programs), then a
    2-D grid of (row group, column strip)."""
    n_rows, n_cols = x_rows.shape
    c1 = torch.empty(n_rows, dtype=torch.float32, device=x_rows.device)
    c2 = torch.empty(n_rows, dtype=torch.float32, device=x_rows.device)
    layer_norm_backward_row_terms_kernel[(programs,)](
        x_rows,
        weight,
        dy_rows,
        mean,
        rstd,
        c1,
        c2,
        n_rows,
        n_cols,
        x_rows.stride(0),
        dy_rows.stride(0),
        **config,
    )
    groups, strips, rows_per_group, strip_config = column_split(n_rows, n_cols)
    dw_partial = torch.empty((groups, n_cols), dtype=torch.float32, device=x_rows.device)
    db_partial = torch.empty((groups, n_cols), dtype=torch.float32, device=x_rows.device) if has_bias else dw_partial
    layer_norm_backward_columns_kernel[(groups, strips)](
        x_rows,
        weight,
        dy_rows,
        dx,
        mean,
        rstd,
        c1,
        c2,
        dw_partial,
        db_partial,
        n_rows,
        n_cols,
        rows_per_group,
        x_rows.stride(0),
        dy_rows.stride(0),
        dx.stride(0),
        HAS_BIAS=has_bias,
        **strip_config,
    )
    return dw_partial, db_partial


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y, x_rows, mean, rstd = _forward(x, weight, bias, eps)
        ctx.save_for_backward(x_rows, weight.contiguous(), mean, rstd)  # (1)!
        ctx.has_bias = bias is not None
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.x_shape = x.shape
        return y

    @staticmethod
    @once_differentiable("layer_norm")  # (3)!
    def backward(ctx, dy):
        x_rows, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = _backward(dy, x_rows, weight, ctx.has_bias, mean, rstd)
        if db is not None:
            db = db.to(ctx.bias_dtype)
        return dx.view(ctx.x_shape), dw, db, None  # (2)!


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float = 1e-5
) -> torch.Tensor:
    """Layer norm over the last dimension of ``x`` (shape ``(..., N)``); differentiable
    with respect to ``x``, ``weight`` and ``bias`` (either may be ``None``, as in PyTorch)."""
    check_inputs(x, weight, bias, eps)
    if x.numel() == 0:  # rows of a valid width, but no rows: nothing to launch
        return F.layer_norm(x, (x.shape[-1],), weight, bias, float(eps))
    if weight is None:  # no scale: a weight of ones, which gets no gradient
        weight = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    needs_grad = any(t is not None and t.requires_grad for t in (x, weight, bias))
    if needs_grad and torch.is_grad_enabled():
        return _LayerNorm.apply(x, weight, bias, eps)
    return _forward(x, weight, bias, eps)[0]


# --8<-- [end:autograd]


if __name__ == "__main__":
    for n_cols in (
        1000,
        max(MAX_FUSED_COLS, norm_launch.FWD_MAX_FUSED_COLS) + 3001,
    ):  # the fused path, then the chunked path
        x = torch.randn(5, n_cols, device=DEVICE, requires_grad=True)
        w = torch.randn(n_cols, device=DEVICE, requires_grad=True)
        b = torch.randn(n_cols, device=DEVICE, requires_grad=True)
        dy = torch.randn(5, n_cols, device=DEVICE)
        layer_norm(x, w, b).backward(dy)
        refs = [t.detach().double().requires_grad_() for t in (x, w, b)]
        F.layer_norm(refs[0], (n_cols,), refs[1], refs[2], 1e-5).backward(dy.double())
        errors = [((t.grad - r.grad).norm() / r.grad.norm()).item() for t, r in zip((x, w, b), refs)]
        print(f"layer_norm on {DEVICE}, 5×{n_cols}: dx, dW, dB errors " + ", ".join(f"{e:.1e}" for e in errors))
        assert max(errors) < 1e-5
