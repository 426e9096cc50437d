"""RMS norm over the last dimension, forward and backward, with dW.

``rms_norm(x, weight, eps)`` equals ``F.rms_norm(x, (N,), weight, eps)`` for
fp32, fp16 and bf16 inputs of shape ``(..., N)`` and is differentiable with
respect to ``x`` and ``weight``.

The layout follows the layer-norm chapter: a forward that keeps
each row in registers (one tile per program) and saves one fp32 ``rstd`` per
row; a backward that computes dx and, in the same pass, each program's
partial sum of ``dy·x̂`` (fp32, in registers), then a second small kernel that
adds the partial rows. Rows wider than ``FWD_MAX_FUSED_COLS`` (forward) or
``MAX_FUSED_COLS`` (backward) take chunked kernels. The launch rules and the
partial-row reduction are shared with that chapter (``examples/norms/launch.py``).

Run this file (``python -m examples.rms_norm.kernel``) for a quick check.
"""

from __future__ import annotations

import academy  # noqa: F401  (sets TRITON_INTERPRET on CPU before triton loads)
from academy import DEVICE
from academy.validation import once_differentiable

import torch
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
def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMS norm computed by PyTorch in fp32, returned in x's dtype."""
    x32 = x.float()
    rstd = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x32 * rstd * weight.float()).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:forward_kernel]
@triton.jit
def rms_norm_forward_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    rstd_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,  # in elements
    eps,
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
    mean_square = tl.sum(x * x, axis=1) / n_cols  # (5)!
    rstd = tl.rsqrt(mean_square + eps)  # (6)!
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)  # (7)!
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last")  # (1)!
    y = x * rstd[:, None] * w.to(tl.float32)[None, :]  # (8)!
    tl.store(y_ptr + row_offsets * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:forward_kernel]


# --8<-- [start:wide_forward_kernel]
@triton.jit
def rms_norm_forward_wide_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    rstd_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,
    eps,
    BLOCK_N: tl.constexpr,  # a chunk of the row; the row is wider
):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_row_stride
        lane_sumsq = tl.zeros([BLOCK_N], tl.float32)  # (1)!
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
            lane_sumsq += x * x
        rstd = tl.rsqrt(tl.sum(lane_sumsq, axis=0) / n_cols + eps)
        tl.store(rstd_ptr + row, rstd)
        for start in range(0, n_cols, BLOCK_N):  # (2)!
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:wide_forward_kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def rms_norm_backward_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    rstd_ptr,
    dw_partial_ptr,  # fp32 (num_programs, n_cols): one row per program
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PREFETCH: tl.constexpr,  # load the next tile before working on this one (if two fit in registers)
):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK_M  # rows between one tile of this program and its next
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)  # (1)!
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
        if PREFETCH:  # (3)!
            x_next = tl.load(x_ptr + next_offsets * x_row_stride + cols[None, :], mask=next_mask, other=0.0)
            dy_next = tl.load(dy_ptr + next_offsets * dy_row_stride + cols[None, :], mask=next_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)  # (4)!

        xhat = x.to(tl.float32) * rstd[:, None]  # (5)!
        wdy = dy.to(tl.float32) * w[None, :]  # (6)!
        c = tl.sum(xhat * wdy, axis=1) / n_cols  # (7)!
        dx = (wdy - xhat * c[:, None]) * rstd[:, None]  # (8)!
        tl.store(dx_ptr + row_offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy.to(tl.float32) * xhat  # (9)!
        if not PREFETCH:
            x_next = tl.load(x_ptr + next_offsets * x_row_stride + cols[None, :], mask=next_mask, other=0.0)
            dy_next = tl.load(dy_ptr + next_offsets * dy_row_stride + cols[None, :], mask=next_mask, other=0.0)
        x = x_next
        dy = dy_next

    tl.store(dw_partial_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(dw_acc, axis=0), mask=col_mask)  # (10)!


# --8<-- [end:backward_kernel]


# --8<-- [start:wide_backward_kernel]
@triton.jit
def rms_norm_backward_wide_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    rstd_ptr,
    dw_partial_ptr,  # fp32 (num_programs, n_cols), zero-filled
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    dw_row = dw_partial_ptr + pid.to(tl.int64) * n_cols
    for row in range(pid, n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        dy_row = dy_ptr + tl.cast(row, tl.int64) * dy_row_stride
        dx_row = dx_ptr + tl.cast(row, tl.int64) * dx_row_stride
        rstd = tl.load(rstd_ptr + row)
        lane_c = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            lane_c += x * rstd * dy * w
        c = tl.sum(lane_c, axis=0) / n_cols
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = x * rstd
            tl.store(dx_row + cols, ((dy * w - xhat * c) * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + cols, mask=mask, other=0.0)  # (1)!
            tl.store(dw_row + cols, dw + dy * xhat, mask=mask)


# --8<-- [end:wide_backward_kernel]


# --8<-- [start:column_backward_kernels]
@triton.jit
def rms_norm_backward_row_terms_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    rstd_ptr,
    c_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    BLOCK_N: tl.constexpr,
):
    """Stage 1 of the column-split backward: each row's c = mean(g ⊙ x̂) (fp32)."""
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        dy_row = dy_ptr + tl.cast(row, tl.int64) * dy_row_stride
        rstd = tl.load(rstd_ptr + row)
        lane_c = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            lane_c += x * rstd * dy * w
        tl.store(c_ptr + row, tl.sum(lane_c, axis=0) / n_cols)


@triton.jit
def rms_norm_backward_columns_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    rstd_ptr,
    c_ptr,
    dw_partial_ptr,  # fp32 (n_groups, n_cols)
    n_rows,
    n_cols,
    rows_per_group,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Stage 2: program (g, j) owns rows of group g and columns of strip j: dx there,
    and the strip's partial dw over the group's rows, in registers."""
    group = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], tl.float32)
    first = group * rows_per_group
    last = tl.minimum(first + rows_per_group, n_rows)
    for start in range(first, last, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < last
        mask = row_mask[:, None] & col_mask[None, :]
        row_offsets = rows.to(tl.int64)[:, None]
        x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        c = tl.load(c_ptr + rows, mask=row_mask, other=0.0)
        xhat = x * rstd[:, None]
        dx = (dy * w[None, :] - xhat * c[:, None]) * rstd[:, None]
        tl.store(dx_ptr + row_offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += tl.sum(dy * xhat, axis=0)
    tl.store(dw_partial_ptr + group.to(tl.int64) * n_cols + cols, dw_acc, mask=col_mask)


# --8<-- [end:column_backward_kernels]


# --8<-- [start:limits]
FWD_MAX_WARPS = 16
"""Most warps per forward program (one tile per program); 8, 16 and 32 tied at 16 384 columns on an H100."""
MAX_FUSED_COLS = 16384
"""Widest row the backward holds in registers; wider rows take the column-split backward."""
PREFETCH_MAX_COLS = 8192
"""Widest row whose in-register backward loads its next tile before working on this one. Wider
rows (a 32-warp program) already fill the 64 registers a thread may have; prefetching there made
the forward+backward at 8192 × 16384 slower on an H200 (566.8 µs, against 450.0 µs for the loop
before it, which loaded each tile as its iteration began), so they load the next tile after the
work on this one, which is when that loop loaded it."""
# --8<-- [end:limits]


# --8<-- [start:launcher]
def check_inputs(x, weight, eps) -> None:
    norm_launch.check_inputs("RMS norm", x, eps, weight=weight)


def _forward(x, weight, eps):
    x_rows = as_rows(x)
    n_rows, n_cols = x_rows.shape
    weight = weight.contiguous()
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)  # (1)!
    in_registers, grid, config = forward_launch(n_rows, n_cols, FWD_MAX_WARPS)
    kernel = rms_norm_forward_kernel if in_registers else rms_norm_forward_wide_kernel
    kernel[(grid,)](x_rows, weight, y, rstd, n_rows, n_cols, x_rows.stride(0), y.stride(0), float(eps), **config)
    return y.view(x.shape), x_rows, rstd


def _backward(dy, x_rows, weight, rstd):
    dy_rows = as_rows(dy)
    n_rows, n_cols = x_rows.shape
    dx = torch.empty((n_rows, n_cols), dtype=x_rows.dtype, device=x_rows.device)  # (2)!
    design, programs, config = backward_launch(n_rows, n_cols, MAX_FUSED_COLS)
    if design == "columns":
        return dx, sum_partials(_backward_columns(dy_rows, x_rows, weight, rstd, dx, programs, config), weight.dtype)
    # the in-register kernel writes its whole partial row; the "rows" kernel adds into it
    make_partials = torch.empty if design == "registers" else torch.zeros
    dw_partial = make_partials((programs, n_cols), dtype=torch.float32, device=x_rows.device)
    if design == "registers":
        kernel, config = rms_norm_backward_kernel, {**config, "PREFETCH": n_cols <= PREFETCH_MAX_COLS}
    else:
        kernel = rms_norm_backward_wide_kernel
    kernel[(programs,)](
        x_rows,
        weight,
        dy_rows,
        dx,
        rstd,
        dw_partial,
        n_rows,
        n_cols,
        x_rows.stride(0),
        dy_rows.stride(0),
        dx.stride(0),
        **config,
    )
    return dx, sum_partials(dw_partial, weight.dtype)


def _backward_columns(dy_rows, x_rows, weight, rstd, dx, programs, config):
    """Wide rows: per-row c first (on ``programs`` persistent programs), then a 2-D grid
    of (row group, column strip); returns the partial rows of dw."""
    n_rows, n_cols = x_rows.shape
    c = torch.empty(n_rows, dtype=torch.float32, device=x_rows.device)
    rms_norm_backward_row_terms_kernel[(programs,)](
        x_rows,
        weight,
        dy_rows,
        rstd,
        c,
        n_rows,
        n_cols,
        x_rows.stride(0),
        dy_rows.stride(0),
        **config,
    )
    groups, strips, rows_per_group, strip_config = column_split(n_rows, n_cols)
    dw_partial = torch.empty((groups, n_cols), dtype=torch.float32, device=x_rows.device)
    rms_norm_backward_columns_kernel[(groups, strips)](
        x_rows,
        weight,
        dy_rows,
        dx,
        rstd,
        c,
        dw_partial,
        n_rows,
        n_cols,
        rows_per_group,
        x_rows.stride(0),
        dy_rows.stride(0),
        dx.stride(0),
        **strip_config,
    )
    return dw_partial


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        y, x_rows, rstd = _forward(x, weight, eps)
        ctx.save_for_backward(x_rows, weight.contiguous(), rstd)  # (1)!
        ctx.x_shape = x.shape
        return y

    @staticmethod
    @once_differentiable("rms_norm")  # (2)!
    def backward(ctx, dy):
        x_rows, weight, rstd = ctx.saved_tensors
        dx, dw = _backward(dy, x_rows, weight, rstd)
        return dx.view(ctx.x_shape), dw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    """RMS norm over the last dimension of ``x`` (shape ``(..., N)``), scaled by
    ``weight`` (``None``: no scale, as in PyTorch); differentiable with respect to ``x`` and ``weight``."""
    check_inputs(x, weight, eps)
    if weight is None:  # no scale: a weight of ones, which gets no gradient
        weight = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    if x.numel() == 0:  # rows of a valid width, but no rows: nothing to launch
        return reference(x, weight, eps) * 1.0
    if (x.requires_grad or weight.requires_grad) and torch.is_grad_enabled():
        return _RMSNorm.apply(x, weight, eps)
    return _forward(x, weight, eps)[0]


# --8<-- [end:autograd]


if __name__ == "__main__":
    for n_cols in (
        1000,
        max(MAX_FUSED_COLS, norm_launch.FWD_MAX_FUSED_COLS) + 3001,
    ):  # the fused path, then the chunked path
        x = torch.randn(5, n_cols, device=DEVICE, requires_grad=True)
        w = torch.randn(n_cols, device=DEVICE, requires_grad=True)
        dy = torch.randn(5, n_cols, device=DEVICE)
        rms_norm(x, w).backward(dy)
        refs = [t.detach().double().requires_grad_() for t in (x, w)]
        reference(*refs).backward(dy.double())
        errors = [((t.grad - r.grad).norm() / r.grad.norm()).item() for t, r in zip((x, w), refs)]
        print(f"rms_norm on {DEVICE}, 5×{n_cols}: dx, dW errors " + ", ".join(f"{e:.1e}" for e in errors))
        assert max(errors) < 1e-5
