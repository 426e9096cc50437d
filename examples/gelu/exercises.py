"""Answers to the GeLU exercises.

* ``gelu_tanh_sigmoid(x)``: the tanh form rewritten as ``x · σ(2z)``, since
  ``½(1 + tanh z) = σ(2z)``: one fewer multiply-add, and no ``1 + tanh``
  cancellation for negative ``x``.
* ``geglu(gate, up)``: ``gelu_tanh(gate) · up`` in one kernel: three passes
  over memory instead of the five of ``gelu`` followed by a multiply.

``tests/gelu/test_exercises.py`` checks both against float64 PyTorch.
"""

from __future__ import annotations

from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl

from examples.gelu.kernel import BLOCK_SIZE, NUM_WARPS, SQRT_2_OVER_PI, check_inputs


# --8<-- [start:sigmoid_form]
@triton.jit
def gelu_tanh_sigmoid_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    z = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    y = x * tl.sigmoid(2.0 * z)  # ½(1 + tanh z) = σ(2z): no tanh, no 1 + (−1 + ε)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def gelu_tanh_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """``F.gelu(x, approximate="tanh")`` computed as ``x · σ(2z)``."""
    check_inputs(x, "tanh")
    check_forward_only("gelu_tanh_sigmoid", x=x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE),)
        gelu_tanh_sigmoid_kernel[grid](x, y, x.numel(), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return y


# --8<-- [end:sigmoid_form]


# --8<-- [start:geglu]
@triton.jit
def geglu_kernel(gate_ptr, up_ptr, h_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    gate = tl.load(gate_ptr + offsets, mask=mask).to(tl.float32)
    up = tl.load(up_ptr + offsets, mask=mask).to(tl.float32)
    z = SQRT_2_OVER_PI * (gate + 0.044715 * gate * gate * gate)
    h = gate * tl.sigmoid(2.0 * z) * up  # GeLU(gate) never goes to memory
    tl.store(h_ptr + offsets, h.to(h_ptr.dtype.element_ty), mask=mask)


def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``F.gelu(gate, approximate="tanh") * up``: read two tensors, write one."""
    check_inputs(gate, "tanh")
    check_inputs(up, "tanh")
    check_forward_only("geglu", gate=gate, up=up)
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError(f"gate and up must match: {tuple(gate.shape)} {gate.dtype} vs {tuple(up.shape)} {up.dtype}")
    h = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel():
        grid = (triton.cdiv(gate.numel(), BLOCK_SIZE),)
        geglu_kernel[grid](gate, up, h, gate.numel(), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return h


# --8<-- [end:geglu]
