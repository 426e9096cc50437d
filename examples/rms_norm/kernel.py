"""RMS norm over the last dimension, forward and backward, with dW.

``rms_norm(x, weight, eps)`` equals ``F.rms_norm(x, (N,), weight, eps)`` for
fp32, fp16 and bf16 inputs of shape ``(..., N)`` and is differentiable with
respect to ``x`` and ``weight``.

The layout follows the layer-norm chapter: a forward that keeps
each row in registers and saves one fp32 ``rstd`` per row; a backward that
computes dx and, in the same pass, each program's partial sum of ``dy·x̂``
(fp32, in registers), then a second small kernel that adds the partial rows.
Rows wider than ``FWD_MAX_FUSED_COLS`` (forward) or ``MAX_FUSED_COLS``
(backward) take chunked kernels.

Run this file (``python -m examples.rms_norm.kernel``) for a quick check.
"""

from __future__ import annotations

import functools

import torch

import academy  # noqa: F401  (sets TRITON_INTERPRET on CPU before triton loads)
import triton
import triton.language as tl

from academy import DEVICE
from academy.validation import check_tensor

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_ROWS = 2**31 - 2**16
"""Row indices are int32 in the kernels (offsets are int64); a tile's last row index must not wrap."""


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
    x_ptr, w_ptr, y_ptr, rstd_ptr,
    n_rows, n_cols,
    x_row_stride, y_row_stride,  # in elements
    eps,
    BLOCK_M: tl.constexpr,  # rows per tile
    BLOCK_N: tl.constexpr,  # next power of two ≥ n_cols: the whole row
):
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    num_tiles = tl.cdiv(n_rows, BLOCK_M)
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):  # (2)!
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
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
    x_ptr, w_ptr, y_ptr, rstd_ptr,
    n_rows, n_cols,
    x_row_stride, y_row_stride,
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
    x_ptr, w_ptr, dy_ptr, dx_ptr, rstd_ptr,
    dw_partial_ptr,  # fp32 (num_programs, n_cols): one row per program
    n_rows, n_cols,
    x_row_stride, dy_row_stride, dx_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], tl.float32)  # (1)!
    num_tiles = tl.cdiv(n_rows, BLOCK_M)
    for tile in range(pid, num_tiles, tl.num_programs(0)):
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        row_offsets = rows.to(tl.int64)[:, None]

        x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)  # (2)!

        xhat = x * rstd[:, None]  # (3)!
        wdy = dy * w[None, :]  # (4)!
        c = tl.sum(xhat * wdy, axis=1) / n_cols  # (5)!
        dx = (wdy - xhat * c[:, None]) * rstd[:, None]  # (6)!
        tl.store(dx_ptr + row_offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += tl.sum(dy * xhat, axis=0)  # (7)!

    tl.store(dw_partial_ptr + pid.to(tl.int64) * n_cols + cols, dw_acc, mask=col_mask)  # (8)!
# --8<-- [end:backward_kernel]


# --8<-- [start:wide_backward_kernel]
@triton.jit
def rms_norm_backward_wide_kernel(
    x_ptr, w_ptr, dy_ptr, dx_ptr, rstd_ptr,
    dw_partial_ptr,  # fp32 (num_programs, n_cols), zero-filled
    n_rows, n_cols,
    x_row_stride, dy_row_stride, dx_row_stride,
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
    x_ptr, w_ptr, dy_ptr, rstd_ptr, c_ptr,
    n_rows, n_cols,
    x_row_stride, dy_row_stride,
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
    x_ptr, w_ptr, dy_ptr, dx_ptr, rstd_ptr, c_ptr,
    dw_partial_ptr,  # fp32 (n_groups, n_cols)
    n_rows, n_cols, rows_per_group,
    x_row_stride, dy_row_stride, dx_row_stride,
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


# --8<-- [start:reduce_kernel]
@triton.jit
def sum_partials_kernel(
    partial_ptr, out_ptr,  # fp32 (n_partials, n_cols) → (n_cols,) in out's dtype
    n_partials, n_cols,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    acc = tl.zeros([BLOCK_P, BLOCK_N], tl.float32)
    for start in range(0, n_partials, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts < n_partials)[:, None] & col_mask[None, :]
        acc += tl.load(partial_ptr + parts.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)
# --8<-- [end:reduce_kernel]


# --8<-- [start:launch_config]
MAX_FUSED_COLS = 16384
"""Widest row the backward holds in registers at once; wider rows take the chunked kernels."""
WIDE_BLOCK_N = 4096
WIDE_NUM_WARPS = 16
MIN_ELEMENTS_PER_TILE = 2048
VALUES_PER_THREAD = 16
FWD_MAX_WARPS = 32
"""Most warps per forward program: the widest in-register rows ran fastest with this many on an H100."""
FWD_ONE_TILE_MAX_COLS = 8192
"""Forward rows up to this width: one tile per program (the grid covers every tile), measured
faster than a persistent grid on an H100; wider rows: a persistent grid of FWD_PROGRAMS_PER_SM."""
FWD_MAX_FUSED_COLS = 16384
"""Widest row the forward holds in registers; wider rows take the chunked two-pass forward."""
FWD_PROGRAMS_PER_SM = 4
FWD_WIDE_PERSISTENT = True
"""Chunked forward: a persistent grid striding over rows (True) or one program per row (False)."""
BWD_PROGRAMS_PER_SM = 2
PERSISTENT = True
REDUCE = "triton"
"""How the partial rows are summed: "triton" (sum_partials_kernel) or "torch" (partials.sum(0))."""
REDUCE_BLOCK_N = 32
REDUCE_BLOCK_P = 32
WIDE_BACKWARD = "columns"
"""Wide rows: "columns" (row terms, then a (groups × column strips) grid with dw in registers)
or "rows" (one pass per row, dw added into a per-program partial row in memory)."""
COLUMNS_BLOCK_M = 4
COLUMNS_BLOCK_N = 1024
COLUMNS_NUM_WARPS = 4
COLUMNS_PROGRAMS_PER_SM = 4


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    """Streaming multiprocessors of the GPU; a small stand-in under the interpreter."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return 2


def tile_config(n_cols: int, max_warps: int = 32) -> dict[str, int]:
    """BLOCK_M × BLOCK_N tile and warps for the kernels that hold whole rows."""
    block_n = triton.next_power_of_2(n_cols)
    block_m = max(1, MIN_ELEMENTS_PER_TILE // block_n)
    num_warps = min(max_warps, max(1, block_m * block_n // (32 * VALUES_PER_THREAD)))
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": num_warps}


def num_programs(n_work: int, num_warps: int, programs_per_sm: int) -> int:
    """A persistent grid: a few programs per SM (as many as fit), never more than the work."""
    if not PERSISTENT:
        return n_work
    resident = max(1, min(programs_per_sm, 64 // num_warps))
    return max(1, min(n_work, sm_count() * resident))
# --8<-- [end:launch_config]


# --8<-- [start:launcher]
def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """View ``t`` as (rows, n_cols) with unit column stride, copying only if needed."""
    rows = t.reshape(-1, t.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def _check_inputs(x, weight, eps) -> None:
    check_tensor("x", x, SUPPORTED_DTYPES)
    check_tensor("weight", weight, SUPPORTED_DTYPES)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: RMS norm needs a non-empty last dimension")
    n = x.shape[-1]
    if tuple(weight.shape) != (n,):
        raise ValueError(f"weight has shape {tuple(weight.shape)}; expected ({n},), the last dimension of x")
    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device} but x is on {x.device}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    if x.numel() // n > MAX_ROWS:
        raise ValueError(f"x has {x.numel() // n} rows; at most {MAX_ROWS} are supported")


def _forward(x, weight, eps):
    x_rows = _as_rows(x)
    n_rows, n_cols = x_rows.shape
    weight = weight.contiguous()
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)  # (1)!
    args = (x_rows, weight, y, rstd, n_rows, n_cols, x_rows.stride(0), y.stride(0), float(eps))
    if n_cols <= FWD_MAX_FUSED_COLS:
        config = tile_config(n_cols, FWD_MAX_WARPS)
        tiles = triton.cdiv(n_rows, config["BLOCK_M"])
        one_tile_each = n_cols <= FWD_ONE_TILE_MAX_COLS
        grid = (tiles if one_tile_each else num_programs(tiles, config["num_warps"], FWD_PROGRAMS_PER_SM),)
        rms_norm_forward_kernel[grid](*args, **config)
    else:
        grid = (num_programs(n_rows, WIDE_NUM_WARPS, FWD_PROGRAMS_PER_SM) if FWD_WIDE_PERSISTENT else n_rows,)
        rms_norm_forward_wide_kernel[grid](*args, BLOCK_N=WIDE_BLOCK_N, num_warps=WIDE_NUM_WARPS)
    return y.view(x.shape), x_rows, rstd


def _sum_partials(partials: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Stage 2: add the per-program partial rows, in fp32, then cast once."""
    n_partials, n_cols = partials.shape
    if REDUCE == "torch":
        return partials.sum(0).to(dtype)
    out = torch.empty(n_cols, dtype=dtype, device=partials.device)
    sum_partials_kernel[(triton.cdiv(n_cols, REDUCE_BLOCK_N),)](
        partials, out, n_partials, n_cols, BLOCK_P=REDUCE_BLOCK_P, BLOCK_N=REDUCE_BLOCK_N, num_warps=4
    )
    return out


def _backward(dy, x_rows, weight, rstd):
    dy_rows = _as_rows(dy)
    n_rows, n_cols = x_rows.shape
    if n_cols > MAX_FUSED_COLS and WIDE_BACKWARD == "columns":
        return _backward_columns(dy_rows, x_rows, weight, rstd)
    dx = torch.empty((n_rows, n_cols), dtype=x_rows.dtype, device=x_rows.device)  # (2)!
    if n_cols <= MAX_FUSED_COLS:
        config = tile_config(n_cols)
        programs = num_programs(triton.cdiv(n_rows, config["BLOCK_M"]), config["num_warps"], BWD_PROGRAMS_PER_SM)
        dw_partial = torch.empty((programs, n_cols), dtype=torch.float32, device=x_rows.device)
        kernel = rms_norm_backward_kernel
    else:
        config = {"BLOCK_N": WIDE_BLOCK_N, "num_warps": WIDE_NUM_WARPS}
        programs = num_programs(n_rows, WIDE_NUM_WARPS, BWD_PROGRAMS_PER_SM)
        dw_partial = torch.zeros((programs, n_cols), dtype=torch.float32, device=x_rows.device)
        kernel = rms_norm_backward_wide_kernel
    kernel[(programs,)](
        x_rows, weight, dy_rows, dx, rstd, dw_partial, n_rows, n_cols,
        x_rows.stride(0), dy_rows.stride(0), dx.stride(0), **config,
    )
    return dx, _sum_partials(dw_partial, weight.dtype)


def _backward_columns(dy_rows, x_rows, weight, rstd):
    """Wide rows: per-row c first, then a 2-D grid of (row group, column strip)."""
    n_rows, n_cols = x_rows.shape
    dx = torch.empty((n_rows, n_cols), dtype=x_rows.dtype, device=x_rows.device)
    c = torch.empty(n_rows, dtype=torch.float32, device=x_rows.device)
    rms_norm_backward_row_terms_kernel[(num_programs(n_rows, WIDE_NUM_WARPS, BWD_PROGRAMS_PER_SM),)](
        x_rows, weight, dy_rows, rstd, c, n_rows, n_cols, x_rows.stride(0), dy_rows.stride(0),
        BLOCK_N=WIDE_BLOCK_N, num_warps=WIDE_NUM_WARPS,
    )
    strips = triton.cdiv(n_cols, COLUMNS_BLOCK_N)
    groups = max(1, min(n_rows, triton.cdiv(sm_count() * COLUMNS_PROGRAMS_PER_SM, strips)))
    rows_per_group = triton.cdiv(n_rows, groups)
    groups = triton.cdiv(n_rows, rows_per_group)
    dw_partial = torch.empty((groups, n_cols), dtype=torch.float32, device=x_rows.device)
    rms_norm_backward_columns_kernel[(groups, strips)](
        x_rows, weight, dy_rows, dx, rstd, c, dw_partial,
        n_rows, n_cols, rows_per_group, x_rows.stride(0), dy_rows.stride(0), dx.stride(0),
        BLOCK_M=COLUMNS_BLOCK_M, BLOCK_N=COLUMNS_BLOCK_N, num_warps=COLUMNS_NUM_WARPS,
    )
    return dx, _sum_partials(dw_partial, weight.dtype)
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
    def backward(ctx, dy):
        x_rows, weight, rstd = ctx.saved_tensors
        dx, dw = _backward(dy, x_rows, weight, rstd)
        return dx.view(ctx.x_shape), dw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMS norm over the last dimension of ``x`` (shape ``(..., N)``), scaled by
    ``weight``; differentiable with respect to ``x`` and ``weight``."""
    _check_inputs(x, weight, eps)
    if x.numel() == 0:  # rows of a valid width, but no rows: nothing to launch
        return reference(x, weight, eps) * 1.0
    if (x.requires_grad or weight.requires_grad) and torch.is_grad_enabled():
        return _RMSNorm.apply(x, weight, eps)
    return _forward(x, weight, eps)[0]
# --8<-- [end:autograd]


if __name__ == "__main__":
    for n_cols in (1000, max(MAX_FUSED_COLS, FWD_MAX_FUSED_COLS) + 3001):  # the fused path, then the chunked path
        x = torch.randn(5, n_cols, device=DEVICE, requires_grad=True)
        w = torch.randn(n_cols, device=DEVICE, requires_grad=True)
        dy = torch.randn(5, n_cols, device=DEVICE)
        rms_norm(x, w).backward(dy)
        refs = [t.detach().double().requires_grad_() for t in (x, w)]
        reference(*refs).backward(dy.double())
        errors = [((t.grad - r.grad).norm() / r.grad.norm()).item() for t, r in zip((x, w), refs)]
        print(f"rms_norm on {DEVICE}, 5×{n_cols}: dx, dW errors " + ", ".join(f"{e:.1e}" for e in errors))
        assert max(errors) < 1e-5
