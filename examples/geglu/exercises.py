"""Answers to the GeGLU exercises.

* ``quick_geglu(gate, up)``: the sigmoid approximation of GeLU,
  ``x·σ(1.702x)`` (as in CLIP's "QuickGELU"), on the gated layer, with its
  derivative.
* ``max_form_gap(lo, hi, n)``: the largest gap between the exact and the tanh
  GeLU on a grid, measured with this chapter's kernel.

``tests/geglu/test_exercises.py`` checks them.
"""

from __future__ import annotations

from academy import DEVICE

import torch
import triton
import triton.language as tl

from examples.geglu.kernel import geglu
from examples.swiglu.kernel import gated


# --8<-- [start:quick_geglu]
@triton.jit
def quick_gelu(x):
    return x * tl.sigmoid(1.702 * x)


@triton.jit
def quick_gelu_and_grad(x):
    s = tl.sigmoid(1.702 * x)
    return x * s, s * (1.0 + 1.702 * x * (1.0 - s))  # d/dx x·σ(kx) = σ(kx)(1 + kx(1 − σ(kx)))


def quick_geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``gate·σ(1.702·gate) · up``; differentiable in both."""
    return gated(gate, up, quick_gelu, quick_gelu_and_grad)


# --8<-- [end:quick_geglu]


# --8<-- [start:form_gap]
def max_form_gap(lo: float = -6.0, hi: float = 6.0, n: int = 12001) -> tuple[float, float]:
    """(max |gelu_exact − gelu_tanh|, the x where it occurs), from the fp32 kernels."""
    x = torch.linspace(lo, hi, n, device=DEVICE)
    one = torch.ones_like(x)
    gap = (geglu(x, one, "none") - geglu(x, one, "tanh")).abs()
    i = int(gap.argmax())
    return gap[i].item(), x[i].item()


# --8<-- [end:form_gap]
