"""GeLU, element-wise: the exact (erf) form and the tanh approximation.

``gelu(x, approximate="none" | "tanh")`` equals
``torch.nn.functional.gelu(x, approximate=...)`` for fp32, fp16 and bf16
tensors of any shape. One kernel reads ``x`` once and writes ``y`` once (two passes over
memory); the op-by-op PyTorch version, ``naive_gelu_tanh``, launches nine
kernels that make 21 passes between them.

Run this file (``python -m examples.gelu.kernel``) for a quick check.
"""

from __future__ import annotations

import math
import warnings

from academy import DEVICE
from academy.validation import check_forward_only

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# --8<-- [start:reference]
APPROXIMATIONS = ("none", "tanh")


def reference(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GeLU as PyTorch computes it, in fp32, returned in ``x``'s dtype."""
    return F.gelu(x.float(), approximate=approximate).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:naive]
def naive_gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation written op by op: every line is one kernel,
    which reads its inputs from memory and writes its result back."""
    cube = x * x * x  # 2 kernels: x*x, then (x*x)*x
    inner = x + 0.044715 * cube  # 2 kernels: the scaling, then the sum
    scaled = math.sqrt(2.0 / math.pi) * inner  # 1 kernel
    t = torch.tanh(scaled)  # 1 kernel
    return 0.5 * x * (1.0 + t)  # 3 kernels: 0.5*x, 1+t, the product


# --8<-- [end:naive]


# --8<-- [start:tanh]
@triton.jit
def stable_tanh(z):
    """tanh(z) = 2·sigmoid(2z) − 1: finite for every finite z."""
    return 2.0 * tl.sigmoid(2.0 * z) - 1.0  # (1)!


# --8<-- [end:tanh]


SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # √(2/π)
RSQRT_2 = tl.constexpr(0.7071067811865476)  # 1/√2


# --8<-- [start:kernel]
@triton.jit
def gelu_kernel(
    x_ptr,
    y_ptr,
    n_elements,
    APPROXIMATE: tl.constexpr,  # True: the tanh form; False: the exact erf form
    BLOCK_SIZE: tl.constexpr,
):
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE  # (1)!
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)  # (2)!
    if APPROXIMATE:  # (3)!
        inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        y = 0.5 * x * (1.0 + stable_tanh(inner))  # (4)!
    else:
        y = 0.5 * x * (1.0 + tl.math.erf(x * RSQRT_2))  # (5)!
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)  # (6)!


# --8<-- [end:kernel]


# --8<-- [start:launcher]
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
BLOCK_SIZE = 2048
NUM_WARPS = 8  # 2048 values over 256 threads: 8 per thread, one 16-byte load in bf16


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GeLU of every element of ``x``: exact (``"none"``) or tanh-approximated; forward only (with
    autograd recording, an ``x`` that requires grad is refused: the result would carry no gradient)."""
    check_inputs(x, approximate)
    check_forward_only("gelu", x=x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n_elements = x.numel()
    if n_elements == 0:
        return y
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    gelu_kernel[grid](
        x,
        y,
        n_elements,
        APPROXIMATE=approximate == "tanh",  # (1)!
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=NUM_WARPS,
    )
    return y


def check_inputs(x: torch.Tensor, approximate: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"approximate must be one of {APPROXIMATIONS}, got {approximate!r}")
    if x.device.type != DEVICE:
        raise ValueError(f"x is on {x.device}, but kernels run on {DEVICE!r} here")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; supported: {SUPPORTED_DTYPES}")
    if not x.is_contiguous():  # (2)!
        raise ValueError(
            f"x is a non-contiguous view (shape {tuple(x.shape)}, strides {x.stride()}); pass x.contiguous()"
        )


# --8<-- [end:launcher]


if __name__ == "__main__":
    # The interpreter runs tl.sigmoid on NumPy, which warns when exp(-2z)
    # overflows to inf: the very value the overflow-safe form relies on.
    warnings.filterwarnings("ignore", "overflow encountered in exp", RuntimeWarning)
    x = torch.randn(3, 1001, device=DEVICE) * 4
    for approximate in APPROXIMATIONS:
        expected = F.gelu(x.double(), approximate=approximate)
        error = ((gelu(x, approximate) - expected).norm() / expected.norm()).item()
        print(f"gelu(approximate={approximate!r}) on {DEVICE}, 3×1001: relative L2 error {error:.1e}")
        assert error < 1e-5
    big = torch.tensor([-1e4, -50.0, 50.0, 1e4], device=DEVICE)
    out = gelu(big, "tanh")
    print("tanh form at ±50, ±1e4:", out.tolist())
    assert torch.isfinite(out).all()
    expected = F.gelu(x.double(), approximate="tanh")
    naive_error = ((naive_gelu_tanh(x) - expected).norm() / expected.norm()).item()
    print(f"naive_gelu_tanh in fp32: relative error {naive_error:.1e}")
    assert naive_error < 1e-5
