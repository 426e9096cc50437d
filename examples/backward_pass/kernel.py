"""A learnable swish, ``y = x · σ(w ⊙ x)``, forward and backward.

``x`` has shape (..., N) and ``w`` has shape (N,): one learnable slope per
column (feature), broadcast over the rows. The backward has the two kinds of
gradient every layer with weights has: ``dx``, element-wise like the forward,
and ``dw``, a sum over all rows, so it needs a reduction.

``swish(x, w)`` takes fp64, fp32, fp16 and bf16 (fp64 so that
``torch.autograd.gradcheck`` can run through the kernels themselves).

Run this file (``python -m examples.backward_pass.kernel``) for a quick check.
"""

from __future__ import annotations

import math

from academy import DEVICE
from academy.validation import check_tensor, once_differentiable

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
BLOCK_M = 16
BLOCK_N = 256


# --8<-- [start:reference]
def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x · σ(w x)`` in PyTorch, in fp32 (fp64 for fp64 inputs); autograd gives its backward."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    xc, wc = x.to(compute), w.to(compute)
    return (xc * torch.sigmoid(wc * xc)).to(x.dtype)


def manual_backward(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The VJP written out by hand in PyTorch: what the backward kernel computes."""
    s = torch.sigmoid(w * x)
    ds = s * (1 - s)  # σ'(z) = σ(z)(1 − σ(z))
    dx = dy * (s + w * x * ds)  # ∂y/∂x = σ + x·σ'·w
    dw = (dy * x * x * ds).reshape(-1, x.shape[-1]).sum(0)  # ∂y/∂w = x·σ'·x, summed over rows
    return dx, dw


# --8<-- [end:reference]


# --8<-- [start:forward_kernel]
@triton.jit
def swish_forward_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    n_rows,
    n_cols,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0)  # (1)!
    if x.dtype != tl.float64:  # (2)!
        x = x.to(tl.float32)
        w = w.to(tl.float32)
    y = x * tl.sigmoid(w[None, :] * x)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:forward_kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def swish_backward_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    dw_partial_ptr,
    n_rows,
    n_cols,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)  # (1)!
    dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0)
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
        dy = dy.to(tl.float32)
        w = w.to(tl.float32)
    s = tl.sigmoid(w[None, :] * x)  # (2)!
    ds = s * (1.0 - s)
    dx = dy * (s + w[None, :] * x * ds)  # (3)!
    tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    dw = tl.sum(dy * x * x * ds, axis=0)  # (4)!
    partial_row = tl.program_id(0).to(tl.int64) * n_cols
    tl.store(dw_partial_ptr + partial_row + cols, dw, mask=cols < n_cols)  # (5)!


# --8<-- [end:backward_kernel]


# --8<-- [start:launcher]
def check_inputs(x: torch.Tensor, w: torch.Tensor) -> None:
    check_tensor("x", x, SUPPORTED_DTYPES)
    check_tensor("w", w, SUPPORTED_DTYPES)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (w scales its last)")
    if w.dim() != 1 or w.shape[0] != x.shape[-1]:
        raise ValueError(f"w must have shape ({x.shape[-1]},) to match x's last dimension, got {tuple(w.shape)}")
    if w.dtype != x.dtype:
        raise TypeError(f"dtypes differ: x {x.dtype} vs w {w.dtype}")


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as contiguous (rows, N); the row count is explicit, since -1 is ambiguous when N = 0."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1]).contiguous()


def _grid(n_rows: int, n_cols: int) -> tuple[int, int]:
    return (triton.cdiv(n_rows, BLOCK_M), triton.cdiv(n_cols, BLOCK_N))


def _forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x_rows = _rows(x)
    y = torch.empty(x_rows.shape, dtype=x.dtype, device=x.device)
    if x_rows.numel():
        swish_forward_kernel[_grid(*x_rows.shape)](
            x_rows, w.contiguous(), y, *x_rows.shape, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N
        )
    return y.view(x.shape)


def _backward(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x_rows, dy_rows = _rows(x), _rows(dy)
    n_rows, n_cols = x_rows.shape
    dx = torch.empty(x_rows.shape, dtype=x.dtype, device=x.device)
    grid = _grid(n_rows, n_cols)
    accumulate = torch.float64 if x.dtype == torch.float64 else torch.float32
    dw_partial = torch.empty((grid[0], n_cols), dtype=accumulate, device=x.device)  # (1)!
    if x_rows.numel():
        swish_backward_kernel[grid](
            x_rows, w.contiguous(), dy_rows, dx, dw_partial, n_rows, n_cols, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N
        )
    dw = dw_partial.sum(dim=0).to(w.dtype)  # (2)!
    return dx.view(x.shape), dw


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)  # (1)!
        return _forward(x, w)

    @staticmethod
    @once_differentiable("swish")  # the backward kernel has no backward: a second derivative raises
    def backward(ctx, dy: torch.Tensor):
        x, w = ctx.saved_tensors
        dx, dw = _backward(x, w, dy)  # (2)!
        return (
            dx if ctx.needs_input_grad[0] else None,  # (3)!
            dw if ctx.needs_input_grad[1] else None,
        )


def swish(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x · σ(w ⊙ x)`` with one slope per column; differentiable in ``x`` and ``w``."""
    check_inputs(x, w)
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
        return _Swish.apply(x, w)
    return _forward(x, w)


# --8<-- [end:autograd]


if __name__ == "__main__":
    x = torch.randn(37, 300, device=DEVICE, dtype=torch.float64, requires_grad=True)
    w = torch.randn(300, device=DEVICE, dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(swish, (x[:3, :5].detach().requires_grad_(), w[:5].detach().requires_grad_()))
    dy = torch.randn_like(x)
    swish(x, w).backward(dy)
    dx, dw = manual_backward(x.detach(), w.detach(), dy)
    print(
        f"swish on {DEVICE}: gradcheck {ok}, dx error {((x.grad - dx).norm() / dx.norm()).item():.1e}, "
        f"dw error {((w.grad - dw).norm() / dw.norm()).item():.1e}"
    )
    assert torch.allclose(x.grad, dx) and torch.allclose(w.grad, dw)
