"""Layer norm over the last dimension, forward and backward, the tutorial way.

``layer_norm(x, weight, bias, eps)`` equals ``F.layer_norm(x, (N,), weight,
bias, eps)``. The forward keeps each row's mean and 1/σ; the backward
computes ``dx`` row by row and adds each row's share of ``dW`` and ``dB``
into one of ``GROUP_SIZE_M`` partial buffers, guarded by a spin lock; a
second kernel sums the buffers column by column.

This is the teaching version; the layer-norm deep-dive chapter builds the
fast one.

Run this file (``python -m examples.layer_norm_locks.kernel``) for a quick check.
"""

from __future__ import annotations

from academy import DEVICE
from academy.validation import as_real, check_tensor, once_differentiable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_N = 16384
"""Widest row: the forward and dx kernels hold a whole row in registers."""


# --8<-- [start:reference]
def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch's layer norm computed in fp32, returned in x's dtype."""
    n = x.shape[-1]
    return F.layer_norm(x.float(), (n,), weight.float(), bias.float(), eps).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:forward_kernel]
@triton.jit
def layer_norm_forward_kernel(
    x_ptr,
    y_ptr,
    w_ptr,
    b_ptr,
    mean_ptr,
    rstd_ptr,
    n_cols,
    eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)  # (1)!
    var = tl.sum(centered * centered, axis=0) / n_cols  # (2)!
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)  # (3)!
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    y = centered * rstd * w + b
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:forward_kernel]


# --8<-- [start:backward_dx_kernel]
@triton.jit
def layer_norm_backward_dx_kernel(
    x_ptr,
    dy_ptr,
    dx_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    dw_partial_ptr,
    db_partial_ptr,  # GROUP_SIZE_M × N fp32 buffers
    locks_ptr,  # 2·GROUP_SIZE_M int32 zeros: the locks, then the "written yet?" counts
    n_cols,
    GROUP_SIZE_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + row)  # (1)!
    rstd = tl.load(rstd_ptr + row)

    # dx: the VJP of one row
    x_hat = tl.where(mask, (x - mean) * rstd, 0.0)
    g = dy * w  # (2)!
    mean_g = tl.sum(g, axis=0) / n_cols
    mean_g_xhat = tl.sum(g * x_hat, axis=0) / n_cols
    dx = (g - mean_g - x_hat * mean_g_xhat) * rstd  # (3)!
    tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)

    # this row's share of dW and dB, added into buffer row % GROUP_SIZE_M
    dw = dy * x_hat
    db = dy
    group = row % GROUP_SIZE_M  # (4)!
    lock = locks_ptr + group
    count = locks_ptr + GROUP_SIZE_M + group
    dw_ptrs = dw_partial_ptr + group * n_cols + cols
    db_ptrs = db_partial_ptr + group * n_cols + cols
    while tl.atomic_cas(lock, 0, 1) == 1:  # (5)!
        pass
    if tl.atomic_xchg(count, 1) == 0:  # (6)!
        tl.store(dw_ptrs, dw, mask=mask)
        tl.store(db_ptrs, db, mask=mask)
    else:
        tl.store(dw_ptrs, dw + tl.load(dw_ptrs, mask=mask, cache_modifier=".cg"), mask=mask)  # (7)!
        tl.store(db_ptrs, db + tl.load(db_ptrs, mask=mask, cache_modifier=".cg"), mask=mask)
    tl.debug_barrier()  # (8)!
    tl.atomic_xchg(lock, 0)  # (9)!


# --8<-- [end:backward_dx_kernel]


# --8<-- [start:backward_dwdb_kernel]
@triton.jit
def layer_norm_backward_dwdb_kernel(
    dw_partial_ptr,
    db_partial_ptr,
    dw_ptr,
    db_ptr,
    n_groups,
    n_cols,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_groups, BLOCK_M):  # (1)!
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows < n_groups)[:, None] & (cols < n_cols)[None, :]
        offsets = rows[:, None] * n_cols + cols[None, :]
        dw += tl.load(dw_partial_ptr + offsets, mask=mask, other=0.0)
        db += tl.load(db_partial_ptr + offsets, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < n_cols)  # (2)!
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=cols < n_cols)


# --8<-- [end:backward_dwdb_kernel]


# --8<-- [start:launcher]
def group_size_m(n_rows: int, n_cols: int) -> int:
    """How many partial buffers: more for narrow rows, never more than there are rows."""
    if n_cols <= 1024:  # (1)!
        groups = 256
    elif n_cols <= 4096:
        groups = 128
    elif n_cols <= 8192:
        groups = 96
    else:
        groups = 64
    return max(1, min(groups, n_rows))


def _warps(block_n: int) -> int:
    return min(max(block_n // 256, 1), 8)


def check_inputs(x, weight, bias, eps) -> None:
    check_tensor("x", x, SUPPORTED_DTYPES)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:  # None: no scale, or no shift, as in PyTorch
            check_tensor(name, t, SUPPORTED_DTYPES)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: layer norm needs a non-empty last dimension")
    n = x.shape[-1]
    if n > MAX_N:
        raise ValueError(f"rows of {n} elements are too wide for this kernel (at most {MAX_N})")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if t.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
        if t.dtype != x.dtype:
            raise TypeError(f"dtypes differ: x {x.dtype} vs {name} {t.dtype}")
    if not as_real("eps", eps) > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")


def _forward(x, weight, bias, eps):
    x_rows = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x_rows.shape
    y = torch.empty(x_rows.shape, dtype=x.dtype, device=x.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block_n = triton.next_power_of_2(n_cols)
    layer_norm_forward_kernel[(n_rows,)](
        x_rows,
        y,
        weight.contiguous(),
        bias.contiguous(),
        mean,
        rstd,
        n_cols,
        float(eps),
        BLOCK_N=block_n,
        num_warps=_warps(block_n),
    )
    return y.view(x.shape), x_rows, mean, rstd


def _backward(dy, x_rows, weight, mean, rstd):
    n_rows, n_cols = x_rows.shape
    dy_rows = dy.reshape(n_rows, n_cols).contiguous()
    groups = group_size_m(n_rows, n_cols)
    block_n = triton.next_power_of_2(n_cols)
    dx = torch.empty(x_rows.shape, dtype=x_rows.dtype, device=x_rows.device)
    dw_partial = torch.empty((groups, n_cols), dtype=torch.float32, device=x_rows.device)  # (2)!
    db_partial = torch.empty((groups, n_cols), dtype=torch.float32, device=x_rows.device)
    locks = torch.zeros(2 * groups, dtype=torch.int32, device=x_rows.device)  # (3)!
    layer_norm_backward_dx_kernel[(n_rows,)](
        x_rows,
        dy_rows,
        dx,
        weight.contiguous(),
        mean,
        rstd,
        dw_partial,
        db_partial,
        locks,
        n_cols,
        GROUP_SIZE_M=groups,
        BLOCK_N=block_n,
        num_warps=_warps(block_n),
    )
    dw = torch.empty(n_cols, dtype=weight.dtype, device=weight.device)
    db = torch.empty(n_cols, dtype=weight.dtype, device=weight.device)
    block = 128
    layer_norm_backward_dwdb_kernel[(triton.cdiv(n_cols, block),)](
        dw_partial,
        db_partial,
        dw,
        db,
        groups,
        n_cols,
        BLOCK_M=32,
        BLOCK_N=block,
    )
    return dx, dw, db


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y, x_rows, mean, rstd = _forward(x, weight, bias, eps)
        ctx.save_for_backward(x_rows, weight, mean, rstd)  # (1)!
        return y

    @staticmethod
    @once_differentiable("layer_norm (with locks)")  # its kernels have no backward of their own
    def backward(ctx, dy):
        x_rows, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = _backward(dy, x_rows, weight, mean, rstd)
        return dx.view(dy.shape), dw, db, None  # (2)!


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float = 1e-5
) -> torch.Tensor:
    """``F.layer_norm(x, (N,), weight, bias, eps)``; differentiable in x, weight and bias (None: no scale
    or no shift, the kernels then read ones or zeros)."""
    check_inputs(x, weight, bias, eps)
    if x.numel() == 0:  # no rows: nothing to launch, and PyTorch's gradients are zeros of the right shapes
        return F.layer_norm(x, (x.shape[-1],), weight, bias, float(eps))
    n = x.shape[-1]
    weight = torch.ones(n, dtype=x.dtype, device=x.device) if weight is None else weight
    bias = torch.zeros(n, dtype=x.dtype, device=x.device) if bias is None else bias
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return _LayerNorm.apply(x, weight, bias, eps)
    return _forward(x, weight, bias, eps)[0]


# --8<-- [end:autograd]


if __name__ == "__main__":
    x = torch.randn(300, 1000, device=DEVICE, requires_grad=True)
    w = torch.rand(1000, device=DEVICE, requires_grad=True)
    b = torch.randn(1000, device=DEVICE, requires_grad=True)
    dy = torch.randn(300, 1000, device=DEVICE)
    layer_norm(x, w, b).backward(dy)
    leaves = [t.detach().double().requires_grad_() for t in (x, w, b)]
    F.layer_norm(leaves[0], (1000,), leaves[1], leaves[2]).backward(dy.double())
    errors = [((t.grad - r.grad).norm() / r.grad.norm()).item() for t, r in zip((x, w, b), leaves)]
    print(f"layer_norm on {DEVICE}: dx, dw, db errors " + ", ".join(f"{e:.1e}" for e in errors))
    assert max(errors) < 1e-5
