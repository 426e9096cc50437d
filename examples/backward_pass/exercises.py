"""Answers to the backward-pass exercises.

* ``silu(x)``: ``x · σ(x)`` with its own backward kernel. It is the learnable
  swish with ``w = 1`` and no weight gradient: the autograd Function saves
  only ``x`` and recomputes ``σ(x)`` in the backward.

``tests/backward_pass/test_exercises.py`` runs gradcheck on it in float64.
"""

from __future__ import annotations

from academy.validation import check_tensor, once_differentiable

import torch
import triton
import triton.language as tl

from examples.backward_pass.kernel import SUPPORTED_DTYPES

BLOCK_SIZE = 1024


# --8<-- [start:silu]
@triton.jit
def silu_forward_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
    tl.store(y_ptr + offsets, (x * tl.sigmoid(x)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def silu_backward_kernel(x_ptr, dy_ptr, dx_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    dy = tl.load(dy_ptr + offsets, mask=mask)
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
        dy = dy.to(tl.float32)
    s = tl.sigmoid(x)  # recomputed, not saved
    dx = dy * s * (1.0 + x * (1.0 - s))  # d/dx x·σ(x) = σ + x·σ·(1 − σ)
    tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, out_like: torch.Tensor, *tensors: torch.Tensor) -> torch.Tensor:
    flat = [t.contiguous().view(-1) for t in tensors]
    out = torch.empty(flat[0].shape, dtype=out_like.dtype, device=out_like.device)
    if out.numel():
        kernel[(triton.cdiv(out.numel(), BLOCK_SIZE),)](*flat, out, out.numel(), BLOCK_SIZE=BLOCK_SIZE)
    return out.view(out_like.shape)


class _SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _launch(silu_forward_kernel, x, x)

    @staticmethod
    @once_differentiable("silu")
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return _launch(silu_backward_kernel, x, x, dy)


def silu(x: torch.Tensor) -> torch.Tensor:
    """``x · σ(x)``, differentiable, through our two kernels."""
    check_tensor("x", x, SUPPORTED_DTYPES)
    return _SiLU.apply(x)


# --8<-- [end:silu]
