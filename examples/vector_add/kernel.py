"""Vector addition: the programming model in one kernel.

``add(x, y)`` returns ``x + y`` for two tensors of the same shape and dtype
(forward only: inputs that require grad are refused).
Run this file (``python -m examples.vector_add.kernel``) for a quick check on
the current device.
"""

from __future__ import annotations

from academy import DEVICE
from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl


# --8<-- [start:reference]
def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What ``add`` must compute, written with PyTorch."""
    return x + y


# --8<-- [end:reference]


# --8<-- [start:kernel]
@triton.jit
def add_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_elements,
    x_stride,
    y_stride,  # in elements, not bytes
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)  # (1)!
    block_start = pid.to(tl.int64) * BLOCK_SIZE  # (2)!
    offsets = block_start + tl.arange(0, BLOCK_SIZE)  # (3)!
    mask = offsets < n_elements  # (4)!
    x = tl.load(x_ptr + offsets * x_stride, mask=mask)  # (5)!
    y = tl.load(y_ptr + offsets * y_stride, mask=mask)
    total = x.to(tl.float32) + y.to(tl.float32)  # (6)!
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)  # (7)!


# --8<-- [end:kernel]


# --8<-- [start:launcher]
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
BLOCK_SIZE = 4096


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Element-wise ``x + y`` computed by ``add_kernel``.

    Both tensors must live on the kernel device, share one shape and one
    dtype, and be either contiguous or one-dimensional with any stride.
    Forward only: with autograd recording, an input that requires grad is
    refused, since the result would carry no gradient.
    """
    check_inputs(x, y)
    check_forward_only("add", x=x, y=y)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n_elements = x.numel()
    if n_elements == 0:  # (1)!
        return out
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)  # (2)!
    add_kernel[grid](
        x,
        y,
        out,  # (3)!
        n_elements,
        _flat_stride(x),
        _flat_stride(y),  # (4)!
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=8,  # (5)!
    )
    return out


def _flat_stride(t: torch.Tensor) -> int:
    # A contiguous tensor of any rank is one flat run of elements (stride 1);
    # a 1-D view such as x[::2] keeps its own stride.
    return 1 if t.is_contiguous() else t.stride(0)


def check_inputs(x: torch.Tensor, y: torch.Tensor) -> None:
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device.type != DEVICE:
            raise ValueError(f"{name} is on {t.device}, but kernels run on {DEVICE!r} here")
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; supported: {SUPPORTED_DTYPES}")
        if not t.is_contiguous() and t.dim() != 1:
            raise ValueError(
                f"{name} is a non-contiguous {t.dim()}-D view (strides {t.stride()}); "
                "pass x.contiguous(), or a 1-D view, which may have any stride"
            )
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: x {tuple(x.shape)} vs y {tuple(y.shape)} (no broadcasting)")
    if x.dtype != y.dtype:
        raise TypeError(f"dtypes differ: x {x.dtype} vs y {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"devices differ: x on {x.device}, y on {y.device}")


# --8<-- [end:launcher]


if __name__ == "__main__":
    n = 98_765  # not a multiple of BLOCK_SIZE: the last block is partly masked
    x = torch.randn(n, device=DEVICE)
    y = torch.randn(n, device=DEVICE)
    error = (add(x, y) - reference(x, y)).abs().max().item()
    print(f"add on {DEVICE}: {n} elements, max abs error {error:.1e}")
    assert error == 0.0, "one fp32 addition is correctly rounded, so the kernel and PyTorch agree to the bit"
