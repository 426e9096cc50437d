"""Fused RMSNorm + SwiGLU: ``rmsnorm_swiglu(x, weight, eps)``, forward and backward.

For ``x`` of shape ``(..., 2N)`` and ``weight`` of length ``2N``: normalise each
row by its root mean square, scale by ``weight``, split the result into halves
``[a, b]`` and return ``silu(a) · b``, of shape ``(..., N)``.

The unfused pair (an RMSNorm kernel, then SwiGLU) writes the normalised row
to memory and reads it back; this kernel never does:

* forward: read ``x`` (2N per row), write ``out`` (N) and one fp32 ``rstd``;
* backward, halves up to ``MAX_ONE_PASS_BWD_HALF``: one kernel reads ``x``
  (2N), ``dout`` (N) and ``rstd`` and writes ``dx`` (2N); ``dweight`` is
  reduced in two stages, lock-free: each persistent program sums its rows
  into its own fp32 row of a small buffer, and a second kernel sums that
  buffer's rows;
* backward, wider halves (a row no longer fits in registers): a first kernel
  computes each row's dot product, a second reads ``x`` and ``dout`` again
  tile by tile to write ``dx``, with one partial ``dweight`` row per group of
  ``TILE_ROWS`` rows, summed by the same second stage.

Run this file (``python -m examples.fused_rmsnorm_swiglu.kernel``) for a quick check.
"""

from __future__ import annotations

from academy import DEVICE
from academy.grid import sm_count
from academy.validation import as_real, check_tensor, once_differentiable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from examples.swiglu.kernel import silu, silu_and_grad, swiglu

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# --8<-- [start:reference]
def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The definition, in fp32, returned in x's dtype."""
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    a, b = y.chunk(2, dim=-1)
    return (F.silu(a) * b).to(x.dtype)


def unfused_torch(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The unfused pair in PyTorch: RMSNorm writes y (2N per row), SwiGLU reads it back."""
    y = F.rms_norm(x, (x.shape[-1],), weight, eps)
    a, b = y.chunk(2, dim=-1)
    return F.silu(a) * b


# --8<-- [end:reference]


# --8<-- [start:forward_kernel]
@triton.jit
def rmsnorm_swiglu_forward_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    rstd_ptr,
    n_half,  # N: out has N columns, x has 2N
    x_row_stride,
    out_row_stride,
    eps,
    BLOCK_N: tl.constexpr,  # columns of each half handled at once
    ONE_PASS: tl.constexpr,  # BLOCK_N ≥ N: the whole row stays in registers
):
    row = tl.program_id(0).to(tl.int64)  # (1)!
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        mask = cols < n_half
        xa = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)  # (2)!
        xb = tl.load(x_row + n_half + cols, mask=mask, other=0.0).to(tl.float32)
        mean_square = (tl.sum(xa * xa, axis=0) + tl.sum(xb * xb, axis=0)) / (2 * n_half)
        rstd = 1.0 / tl.sqrt(mean_square + eps)  # (3)!
        a = xa * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)  # (4)!
        b = xb * rstd * tl.load(w_ptr + n_half + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (silu(a) * b).to(out_ptr.dtype.element_ty), mask=mask)  # (5)!
    else:
        partial = tl.zeros([BLOCK_N], tl.float32)  # (6)!
        for start in range(0, n_half, BLOCK_N):
            mask = start + cols < n_half
            xa = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            xb = tl.load(x_row + n_half + start + cols, mask=mask, other=0.0).to(tl.float32)
            partial += xa * xa + xb * xb
        rstd = 1.0 / tl.sqrt(tl.sum(partial, axis=0) / (2 * n_half) + eps)
        for start in range(0, n_half, BLOCK_N):  # (7)!
            mask = start + cols < n_half
            xa = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            xb = tl.load(x_row + n_half + start + cols, mask=mask, other=0.0).to(tl.float32)
            a = xa * rstd * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            b = xb * rstd * tl.load(w_ptr + n_half + start + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(out_row + start + cols, (silu(a) * b).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)  # (8)!


# --8<-- [end:forward_kernel]


# --8<-- [start:backward_chunk]
@triton.jit
def _swiglu_grads(xa_hat, xb_hat, wa, wb, dout):
    """The SwiGLU gradients w.r.t. a and b (da, db) and dx̂ = dy·w, the
    gradient w.r.t. x̂, for one block of both halves (any shape)."""
    a = xa_hat * wa  # (1)!
    b = xb_hat * wb
    f, df = silu_and_grad(a)
    da = dout * b * df  # (2)!
    db = dout * f  # (3)!
    return da, db, da * wa, db * wb  # (4)!


@triton.jit
def _backward_terms(x_row, w_ptr, dout_row, cols, mask, n_half, rstd):
    """One chunk of one row: x̂ (normalised x) and the gradients above."""
    xa_hat = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) * rstd
    xb_hat = tl.load(x_row + n_half + cols, mask=mask, other=0.0).to(tl.float32) * rstd
    wa = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    wb = tl.load(w_ptr + n_half + cols, mask=mask, other=0.0).to(tl.float32)
    dout = tl.load(dout_row + cols, mask=mask, other=0.0).to(tl.float32)
    da, db, ga, gb = _swiglu_grads(xa_hat, xb_hat, wa, wb, dout)
    return xa_hat, xb_hat, da, db, ga, gb


# --8<-- [end:backward_chunk]


# --8<-- [start:backward_kernel]
@triton.jit
def rmsnorm_swiglu_backward_kernel(
    x_ptr,
    w_ptr,
    dout_ptr,
    rstd_ptr,
    dx_ptr,
    dw_partial_ptr,
    n_rows,
    n_half,
    x_row_stride,
    dout_row_stride,
    dx_row_stride,
    BLOCK_N: tl.constexpr,  # ≥ N: the whole row stays in registers
):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_half
    inv_width = 1.0 / (2 * n_half)
    partial_row = dw_partial_ptr + pid.to(tl.int64) * (2 * n_half)  # (1)!
    dwa = tl.zeros([BLOCK_N], tl.float32)  # (2)!
    dwb = tl.zeros([BLOCK_N], tl.float32)
    for row in range(pid, n_rows, n_programs):  # (3)!
        row64 = tl.cast(row, tl.int64)
        rstd = tl.load(rstd_ptr + row64)
        x_row = x_ptr + row64 * x_row_stride
        xa_hat, xb_hat, da, db, ga, gb = _backward_terms(
            x_row, w_ptr, dout_ptr + row64 * dout_row_stride, cols, mask, n_half, rstd
        )
        dwa += da * xa_hat  # (4)!
        dwb += db * xb_hat
        dot = (tl.sum(ga * xa_hat, axis=0) + tl.sum(gb * xb_hat, axis=0)) * inv_width  # (5)!
        dx_row = dx_ptr + row64 * dx_row_stride
        tl.store(dx_row + cols, (rstd * (ga - xa_hat * dot)).to(dx_ptr.dtype.element_ty), mask=mask)  # (6)!
        tl.store(dx_row + n_half + cols, (rstd * (gb - xb_hat * dot)).to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(partial_row + cols, dwa, mask=mask)  # (7)!
    tl.store(partial_row + n_half + cols, dwb, mask=mask)


# --8<-- [end:backward_kernel]


# --8<-- [start:row_dot_kernel]
@triton.jit
def row_dot_kernel(
    x_ptr,
    w_ptr,
    dout_ptr,
    rstd_ptr,
    dot_ptr,
    n_half,
    x_row_stride,
    dout_row_stride,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)  # (1)!
    rstd = tl.load(rstd_ptr + row)
    x_row = x_ptr + row * x_row_stride
    dout_row = dout_ptr + row * dout_row_stride
    cols = tl.arange(0, BLOCK_N)
    partial = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_half, BLOCK_N):
        c = start + cols
        xa_hat, xb_hat, da, db, ga, gb = _backward_terms(x_row, w_ptr, dout_row, c, c < n_half, n_half, rstd)
        partial += ga * xa_hat + gb * xb_hat  # (2)!
    tl.store(dot_ptr + row, tl.sum(partial, axis=0) / (2 * n_half))  # (3)!


# --8<-- [end:row_dot_kernel]


# --8<-- [start:tile_kernel]
@triton.jit
def backward_tile_kernel(
    x_ptr,
    w_ptr,
    dout_ptr,
    rstd_ptr,
    dot_ptr,
    dx_ptr,
    dw_partial_ptr,
    n_rows,
    n_half,
    x_row_stride,
    dout_row_stride,
    dx_row_stride,
    ROWS_PER_PROGRAM: tl.constexpr,  # rows of one group (a multiple of BLOCK_R)
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,  # one step: BLOCK_R rows × BLOCK_C columns of each half
):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)  # (1)!
    group = tl.program_id(1)
    col_mask = cols < n_half
    wa = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]  # (2)!
    wb = tl.load(w_ptr + n_half + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    dwa = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)  # (3)!
    dwb = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    first = group * ROWS_PER_PROGRAM
    last = tl.minimum(first + ROWS_PER_PROGRAM, n_rows)
    for r in range(0, ROWS_PER_PROGRAM, BLOCK_R):
        rows = first + r + tl.arange(0, BLOCK_R)
        row_mask = rows < last
        rows64 = rows.to(tl.int64)  # (4)!
        mask = row_mask[:, None] & col_mask[None, :]
        rstd = tl.load(rstd_ptr + rows64, mask=row_mask, other=0.0)[:, None]
        dot = tl.load(dot_ptr + rows64, mask=row_mask, other=0.0)[:, None]
        x_tile = x_ptr + rows64[:, None] * x_row_stride + cols[None, :]
        xa_hat = tl.load(x_tile, mask=mask, other=0.0).to(tl.float32) * rstd
        xb_hat = tl.load(x_tile + n_half, mask=mask, other=0.0).to(tl.float32) * rstd
        dout = tl.load(dout_ptr + rows64[:, None] * dout_row_stride + cols[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
        da, db, ga, gb = _swiglu_grads(xa_hat, xb_hat, wa, wb, dout)
        dx_tile = dx_ptr + rows64[:, None] * dx_row_stride + cols[None, :]
        tl.store(dx_tile, (rstd * (ga - xa_hat * dot)).to(dx_ptr.dtype.element_ty), mask=mask)  # (5)!
        tl.store(dx_tile + n_half, (rstd * (gb - xb_hat * dot)).to(dx_ptr.dtype.element_ty), mask=mask)
        dwa += da * xa_hat  # (6)!
        dwb += db * xb_hat
    partial_row = dw_partial_ptr + group.to(tl.int64) * (2 * n_half)
    tl.store(partial_row + cols, tl.sum(dwa, axis=0), mask=col_mask)  # (7)!
    tl.store(partial_row + n_half + cols, tl.sum(dwb, axis=0), mask=col_mask)


# --8<-- [end:tile_kernel]


# --8<-- [start:dw_kernel]
@triton.jit
def sum_rows_kernel(
    partial_ptr,
    out_ptr,
    n_partial_rows,
    n_cols,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_P, BLOCK_C], tl.float32)
    for start in range(0, n_partial_rows, BLOCK_P):  # (1)!
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows < n_partial_rows)[:, None] & (cols < n_cols)[None, :]
        acc += tl.load(partial_ptr + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=cols < n_cols)  # (2)!


# --8<-- [end:dw_kernel]


# --8<-- [start:launcher]
MAX_ONE_PASS_HALF = 8192
"""Widest half (N) the forward keeps in registers; wider rows take two chunked passes."""
CHUNK_N = 4096
"""Chunk of each half on the chunked forward."""
FWD_NUM_WARPS = 8
"""Forward warps on the one-pass path."""
CHUNKED_FWD_NUM_WARPS = 16
"""Forward warps on the chunked path."""
MAX_ONE_PASS_BWD_HALF = 4096
"""Widest half the one-kernel persistent backward takes; wider rows take the two-kernel backward."""
BWD_NUM_WARPS = 8
PROGRAMS_PER_SM = 2
"""One-kernel backward: persistent programs per SM (each owns one fp32 row of dweight partial sums)."""
DOT_CHUNK_N, DOT_NUM_WARPS = 4096, 16
"""Two-kernel backward, kernel 1: one program per row, chunks of DOT_CHUNK_N."""
TILE_R, TILE_C, TILE_ROWS, TILE_NUM_WARPS = 1, 2048, 128, 8
"""Two-kernel backward, kernel 2: tiles of TILE_R rows × TILE_C columns, TILE_ROWS rows per program."""


def _block(n_half: int) -> tuple[int, bool]:
    if n_half <= MAX_ONE_PASS_HALF:
        return triton.next_power_of_2(n_half), True
    return CHUNK_N, False


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def _forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x_rows = _as_rows(x)
    n_rows, n_half = x_rows.shape[0], x_rows.shape[1] // 2
    out = torch.empty((n_rows, n_half), dtype=x.dtype, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)  # (1)!
    block_n, one_pass = _block(n_half)
    rmsnorm_swiglu_forward_kernel[(n_rows,)](
        x_rows,
        weight,
        out,
        rstd,
        n_half,
        x_rows.stride(0),
        out.stride(0),
        eps,
        BLOCK_N=block_n,
        ONE_PASS=one_pass,
        num_warps=FWD_NUM_WARPS if one_pass else CHUNKED_FWD_NUM_WARPS,
    )
    return out.view(*x.shape[:-1], n_half), rstd


def _backward(x, weight, rstd, dout) -> tuple[torch.Tensor, torch.Tensor]:
    x_rows, dout_rows = _as_rows(x), _as_rows(dout)
    n_rows, n_half = dout_rows.shape
    dx = torch.empty(x_rows.shape, dtype=x.dtype, device=x.device)
    strides = (x_rows.stride(0), dout_rows.stride(0), dx.stride(0))
    if n_half <= MAX_ONE_PASS_BWD_HALF:  # one kernel, the row in registers
        n_partial = min(n_rows, sm_count() * PROGRAMS_PER_SM)
        dw_partial = torch.empty((n_partial, 2 * n_half), dtype=torch.float32, device=x.device)  # (2)!
        rmsnorm_swiglu_backward_kernel[(n_partial,)](
            x_rows,
            weight,
            dout_rows,
            rstd,
            dx,
            dw_partial,
            n_rows,
            n_half,
            *strides,
            BLOCK_N=triton.next_power_of_2(n_half),
            num_warps=BWD_NUM_WARPS,
        )
    else:  # two kernels: the row dot products, then dx and dweight tile by tile
        dot = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        row_dot_kernel[(n_rows,)](
            x_rows,
            weight,
            dout_rows,
            rstd,
            dot,
            n_half,
            strides[0],
            strides[1],
            BLOCK_N=min(DOT_CHUNK_N, triton.next_power_of_2(n_half)),
            num_warps=DOT_NUM_WARPS,
        )
        n_partial = triton.cdiv(n_rows, TILE_ROWS)
        dw_partial = torch.empty((n_partial, 2 * n_half), dtype=torch.float32, device=x.device)  # (3)!
        backward_tile_kernel[(triton.cdiv(n_half, TILE_C), n_partial)](
            x_rows,
            weight,
            dout_rows,
            rstd,
            dot,
            dx,
            dw_partial,
            n_rows,
            n_half,
            *strides,
            ROWS_PER_PROGRAM=TILE_ROWS,
            BLOCK_R=TILE_R,
            BLOCK_C=TILE_C,
            num_warps=TILE_NUM_WARPS,
        )
    dweight = torch.empty(2 * n_half, dtype=weight.dtype, device=weight.device)
    sum_rows_kernel[(triton.cdiv(2 * n_half, 256),)](
        dw_partial,
        dweight,
        n_partial,
        2 * n_half,
        BLOCK_P=32,
        BLOCK_C=256,  # (4)!
    )
    return dx.view(x.shape), dweight


def check_inputs(x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    check_tensor("x", x, SUPPORTED_DTYPES)
    check_tensor("weight", weight, SUPPORTED_DTYPES)
    if x.dim() == 0 or x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(f"x has shape {tuple(x.shape)}: expected (..., 2N) with an even, non-zero last dimension")
    if weight.shape != (x.shape[-1],):
        raise ValueError(f"weight has shape {tuple(weight.shape)}: expected ({x.shape[-1]},), one per column of x")
    if weight.dtype != x.dtype:
        raise TypeError(f"dtypes differ: x {x.dtype} vs weight {weight.dtype}")
    if weight.device != x.device:
        raise ValueError(f"devices differ: x on {x.device}, weight on {weight.device}")
    if not weight.is_contiguous():
        raise ValueError(f"weight has stride {weight.stride()}; pass weight.contiguous()")
    if not as_real("eps", eps) > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    if x.numel() // x.shape[-1] > 2**31 - 1:  # (5)!
        raise ValueError(f"x has {x.numel() // x.shape[-1]} rows; at most 2**31 - 1 are supported")


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _RMSNormSwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        out, rstd = _forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)  # (1)!
        return out

    @staticmethod
    @once_differentiable("rmsnorm_swiglu")  # (2)!
    def backward(ctx, dout):
        x, weight, rstd = ctx.saved_tensors
        dx, dweight = _backward(x, weight, rstd, dout)
        return dx, dweight, None


def rmsnorm_swiglu(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``silu(a) · b`` where ``[a, b] = rmsnorm(x) · weight``; x is ``(..., 2N)``, the result ``(..., N)``."""
    check_inputs(x, weight, eps)
    if x.numel() == 0:  # no rows: nothing to launch, and PyTorch's gradients are zeros of the right shapes
        return reference(x, weight, float(eps))
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _RMSNormSwiGLU.apply(x, weight, float(eps))
    return _forward(x, weight, float(eps))[0]


# --8<-- [end:autograd]


def unfused_academy(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The unfused pair from this handbook's own kernels: ``rms_norm`` then ``swiglu``.

    ``examples.rms_norm`` is imported here, when first called, so this chapter
    works before that chapter exists."""
    from examples.rms_norm.kernel import rms_norm

    y = rms_norm(x, weight, eps=eps)
    a, b = y.chunk(2, dim=-1)
    return swiglu(a, b)


if __name__ == "__main__":
    for n_half, chunked in ((1000, False), (300, True)):
        if chunked:  # force the chunked forward and the two-kernel backward with small blocks
            MAX_ONE_PASS_HALF = MAX_ONE_PASS_BWD_HALF = 64
            CHUNK_N = DOT_CHUNK_N = 128
            TILE_C, TILE_ROWS = 64, 4
        x = torch.randn(6, 2 * n_half, device=DEVICE, requires_grad=True)
        weight = (1 + 0.1 * torch.randn(2 * n_half, device=DEVICE)).requires_grad_()
        dout = torch.randn(6, n_half, device=DEVICE)
        out = rmsnorm_swiglu(x, weight)
        out.backward(dout)
        x64, w64 = x.detach().double().requires_grad_(), weight.detach().double().requires_grad_()
        ref = reference(x64, w64)
        ref.backward(dout.double())
        errors = [
            ((a - b).norm() / b.norm()).item() for a, b in ((out, ref), (x.grad, x64.grad), (weight.grad, w64.grad))
        ]
        path = "chunked" if chunked else "one-pass"
        print(
            f"rmsnorm_swiglu on {DEVICE}, 6×{2 * n_half} ({path}): errors out/dx/dweight "
            + " ".join(f"{e:.1e}" for e in errors)
        )
        assert max(errors) < 1e-5
