"""Answers to the SwiGLU exercises.

* ``reglu(gate, up)``: ``relu(gate) · up`` on the gated layer: two small
  ``@triton.jit`` functions are all a new gated activation needs.
* ``swish_glu(gate, up, beta)``: ``gate·σ(β·gate) · up`` (Swish-β), with β a
  run-time scalar rather than a compile-time one.

``tests/swiglu/test_exercises.py`` checks them against PyTorch autograd.
"""

from __future__ import annotations

from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl

from examples.swiglu.kernel import check_inputs, gated


# --8<-- [start:reglu]
@triton.jit
def relu(x):
    return tl.maximum(x, 0.0)


@triton.jit
def relu_and_grad(x):
    return tl.maximum(x, 0.0), tl.where(x > 0, 1.0, 0.0)  # the derivative at 0 taken as 0, as PyTorch does


def reglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``relu(gate) · up``; differentiable in both."""
    return gated(gate, up, relu, relu_and_grad)


# --8<-- [end:reglu]


# --8<-- [start:swish_glu]
@triton.jit
def swish_glu_forward_kernel(gate_ptr, up_ptr, out_ptr, n_elements, beta, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    g = tl.load(gate_ptr + offsets, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + offsets, mask=mask).to(tl.float32)
    out = g * tl.sigmoid(beta * g) * u
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def swish_glu(gate: torch.Tensor, up: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """``gate · σ(β·gate) · up`` for contiguous inputs (forward only). β = 1 is SwiGLU."""
    check_inputs(gate, up)
    check_forward_only("swish_glu", gate=gate, up=up)
    if not (gate.is_contiguous() and up.is_contiguous()):
        raise ValueError("swish_glu takes contiguous gate and up")
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    n = gate.numel()
    if n:
        swish_glu_forward_kernel[(triton.cdiv(n, 1024),)](gate, up, out, n, float(beta), BLOCK_SIZE=1024)
    return out


# --8<-- [end:swish_glu]
