"""GeGLU, element-wise: ``geglu(gate, up, approximate) = gelu(gate) · up``.

``geglu(gate, up, approximate="none" | "tanh")`` equals
``F.gelu(gate, approximate=approximate) * up`` for fp32, fp16 and bf16
tensors of shape ``(..., N)`` and is differentiable in both inputs.

The kernels, launcher and autograd Function are the gated element-wise layer
of ``examples/swiglu/kernel.py``; this file adds only what is GeLU's: the two
activations and their derivatives, as ``@triton.jit`` functions the layer
takes as compile-time arguments. The tanh comes from the Learn track's GeLU
kernel (``examples/gelu/kernel.py``), in its overflow-safe form.

Run this file (``python -m examples.geglu.kernel``) for a quick check.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from examples.gelu.kernel import RSQRT_2, SQRT_2_OVER_PI, stable_tanh
from examples.swiglu.kernel import gated

APPROXIMATIONS = ("none", "tanh")
RSQRT_2PI = tl.constexpr(0.3989422804014327)  # 1/√(2π), the normal density's constant
CUBIC = tl.constexpr(0.044715)  # the tanh form's cubic coefficient


# --8<-- [start:reference]
def reference(gate: torch.Tensor, up: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GeGLU as PyTorch computes it, in fp32, returned in the inputs' dtype."""
    return (F.gelu(gate.float(), approximate=approximate) * up.float()).to(gate.dtype)


# --8<-- [end:reference]


# --8<-- [start:gelu_exact]
@triton.jit
def gelu_exact(x):
    """x·Φ(x), Φ the standard normal CDF written with erf."""
    return 0.5 * x * (1.0 + tl.math.erf(x * RSQRT_2))  # (1)!


@triton.jit
def gelu_exact_and_grad(x):
    cdf = 0.5 * (1.0 + tl.math.erf(x * RSQRT_2))  # (2)!
    pdf = RSQRT_2PI * tl.exp(-0.5 * x * x)  # (3)!
    return x * cdf, cdf + x * pdf  # (4)!


# --8<-- [end:gelu_exact]


# --8<-- [start:gelu_tanh]
@triton.jit
def gelu_tanh(x):
    """½x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    inner = SQRT_2_OVER_PI * (x + CUBIC * x * x * x)
    return 0.5 * x * (1.0 + stable_tanh(inner))  # (1)!


@triton.jit
def gelu_tanh_and_grad(x):
    inner = SQRT_2_OVER_PI * (x + CUBIC * x * x * x)  # (2)!
    t = stable_tanh(inner)
    d_inner = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x)  # (3)!
    df = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner  # (4)!
    return 0.5 * x * (1.0 + t), df


# --8<-- [end:gelu_tanh]


# --8<-- [start:launcher]
ACTIVATIONS = {  # (1)!
    "none": (gelu_exact, gelu_exact_and_grad),
    "tanh": (gelu_tanh, gelu_tanh_and_grad),
}


def geglu(gate: torch.Tensor, up: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``gelu(gate, approximate) · up`` for tensors of one shape ``(..., N)``; differentiable in both."""
    if approximate not in APPROXIMATIONS:  # (2)!
        raise ValueError(f"approximate must be one of {APPROXIMATIONS}, got {approximate!r}")
    return gated(gate, up, *ACTIVATIONS[approximate])


# --8<-- [end:launcher]


if __name__ == "__main__":
    import warnings

    from academy import DEVICE

    # Under the interpreter tl.sigmoid runs on NumPy, which warns when exp(-2z) overflows to inf.
    warnings.filterwarnings("ignore", "overflow encountered in exp", RuntimeWarning)
    for approximate in APPROXIMATIONS:
        gate = (torch.randn(5, 1001, device=DEVICE) * 3).requires_grad_()
        up = torch.randn(5, 1001, device=DEVICE, requires_grad=True)
        dout = torch.randn(5, 1001, device=DEVICE)
        out = geglu(gate, up, approximate)
        out.backward(dout)
        g64, u64 = gate.detach().double().requires_grad_(), up.detach().double().requires_grad_()
        ref = F.gelu(g64, approximate=approximate) * u64
        ref.backward(dout.double())
        errors = [
            ((a - b).norm() / b.norm()).item() for a, b in ((out, ref), (gate.grad, g64.grad), (up.grad, u64.grad))
        ]
        print(
            f"geglu(approximate={approximate!r}) on {DEVICE}, 5×1001: errors out/dgate/dup "
            + " ".join(f"{e:.1e}" for e in errors)
        )
        assert max(errors) < 1e-5
