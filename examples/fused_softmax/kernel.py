"""Fused softmax over the last dimension, forward and backward.

``softmax(x)`` equals ``torch.softmax(x, dim=-1)`` for fp32, fp16 and bf16
inputs of any shape, and is differentiable. Rows that fit in registers take
one trip through memory (read once, write once); wider rows take the online
path, which reads them twice and never spills.

Run this file (``python -m examples.fused_softmax.kernel``) for a quick check.
"""

from __future__ import annotations

import functools

from academy import DEVICE

import torch
import triton
import triton.language as tl


# --8<-- [start:reference]
def reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, computed by PyTorch in fp32."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """The unfused version: five kernels, each a full trip through memory."""
    row_max = x.max(dim=-1, keepdim=True).values  # read x, write M values
    shifted = x - row_max  # read x and the maxima, write x.numel() values
    numerator = torch.exp(shifted)  # read and write x.numel() values
    denominator = numerator.sum(dim=-1, keepdim=True)  # read x.numel(), write M
    return numerator / denominator  # read x.numel() and M, write x.numel()


# --8<-- [end:reference]


# --8<-- [start:forward_kernel]
@triton.jit
def softmax_forward_kernel(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,  # in elements
    BLOCK_M: tl.constexpr,  # rows per program
    BLOCK_N: tl.constexpr,  # next power of two ≥ n_cols: the whole row
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]  # (1)!
    row_offsets = rows.to(tl.int64)[:, None]  # (2)!

    x = tl.load(
        x_ptr + row_offsets * x_row_stride + cols[None, :],
        mask=mask,
        other=-float("inf"),  # (3)!
    ).to(tl.float32)  # (4)!
    row_max = tl.max(x, axis=1)  # (5)!
    numerator = tl.exp(x - row_max[:, None])  # (6)!
    denominator = tl.sum(numerator, axis=1)  # (7)!
    y = numerator / denominator[:, None]  # (8)!

    tl.store(
        y_ptr + row_offsets * y_row_stride + cols[None, :],
        y.to(y_ptr.dtype.element_ty),
        mask=mask,  # (9)!
    )


# --8<-- [end:forward_kernel]


# --8<-- [start:online_forward_kernel]
@triton.jit
def softmax_online_forward_kernel(
    x_ptr,
    y_ptr,
    n_cols,
    x_row_stride,
    y_row_stride,
    BLOCK_N: tl.constexpr,  # a chunk of the row; the row is wider
):
    row = tl.program_id(0).to(tl.int64)  # (1)!
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride

    # Pass 1: every lane keeps its own running maximum and running sum.
    running_max = tl.full([BLOCK_N], -float("inf"), tl.float32)  # (2)!
    running_sum = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)  # (3)!
        running_sum = running_sum * tl.exp(running_max - safe_max) + tl.exp(x - safe_max)  # (4)!
        running_max = new_max

    # Combine the lanes: rescale each lane's sum to the row's maximum.
    row_max = tl.max(running_max, axis=0)  # (5)!
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)  # (6)!

    # Pass 2: read the row again and write the normalised values.
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)  # (7)!
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:online_forward_kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def softmax_backward_kernel(
    y_ptr,
    dy_ptr,
    dx_ptr,
    n_rows,
    n_cols,
    y_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    row_offsets = rows.to(tl.int64)[:, None]

    y = tl.load(y_ptr + row_offsets * y_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)  # (1)!
    dy = tl.load(dy_ptr + row_offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=1)  # (2)!
    dx = y * (dy - dot[:, None])  # (3)!
    tl.store(dx_ptr + row_offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:backward_kernel]


# --8<-- [start:online_backward_kernel]
@triton.jit
def softmax_online_backward_kernel(
    y_ptr,
    dy_ptr,
    dx_ptr,
    n_cols,
    y_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    y_row = y_ptr + row * y_row_stride
    dy_row = dy_ptr + row * dy_row_stride
    dx_row = dx_ptr + row * dx_row_stride

    partial_dot = tl.zeros([BLOCK_N], tl.float32)  # (1)!
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        partial_dot += y * dy
    dot = tl.sum(partial_dot, axis=0)  # (2)!

    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_row + cols, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)  # (3)!


# --8<-- [end:online_backward_kernel]


# --8<-- [start:launch_config]
MAX_FUSED_COLS = 32768
"""Widest row held in registers at once; wider rows take the online kernels."""
ONLINE_BLOCK_N = 16384
"""Chunk width of the online kernels (a 16K chunk with 32 warps measured best at N = 65536)."""
ONLINE_NUM_WARPS = 32


@functools.cache
def launch_config(n_cols: int) -> dict[str, int]:
    """Block shape and warps for the one-pass kernels (forward and backward).

    Two rules, read off a sweep of (BLOCK_M, num_warps) pairs on an H100,
    timed as the benchmarks are:

    * a program owns at least ``MIN_ELEMENTS_PER_PROGRAM`` values, or it ends
      before its loads have hidden the memory latency: narrow rows are packed
      several to a program;
    * a thread holds 16 values (two 16-byte loads of bf16), which sets
      ``num_warps``; at the 32-warp cap (rows above 16K) a thread holds more.
    """
    block_n = triton.next_power_of_2(n_cols)
    block_m = max(1, MIN_ELEMENTS_PER_PROGRAM // block_n)  # (1)!
    num_warps = min(32, max(1, block_m * block_n // (32 * VALUES_PER_THREAD)))  # (2)!
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": num_warps}


MIN_ELEMENTS_PER_PROGRAM = 2048
VALUES_PER_THREAD = 16
# --8<-- [end:launch_config]


# --8<-- [start:launcher]
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """View ``t`` as (rows, n_cols) with unit column stride, copying only if needed."""
    rows = t.reshape(-1, t.shape[-1])  # (1)!
    return rows if rows.stride(-1) == 1 else rows.contiguous()  # (2)!


def _forward(x: torch.Tensor) -> torch.Tensor:
    x_rows = _as_rows(x)
    n_rows, n_cols = x_rows.shape
    y_rows = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_cols <= MAX_FUSED_COLS:  # (3)!
        config = launch_config(n_cols)
        grid = (triton.cdiv(n_rows, config["BLOCK_M"]),)  # (4)!
        softmax_forward_kernel[grid](x_rows, y_rows, n_rows, n_cols, x_rows.stride(0), y_rows.stride(0), **config)
    else:
        softmax_online_forward_kernel[(n_rows,)](  # (5)!
            x_rows,
            y_rows,
            n_cols,
            x_rows.stride(0),
            y_rows.stride(0),
            BLOCK_N=ONLINE_BLOCK_N,
            num_warps=ONLINE_NUM_WARPS,
        )
    return y_rows.view(x.shape)


def _backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y_rows, dy_rows = _as_rows(y), _as_rows(dy)
    n_rows, n_cols = y_rows.shape
    dx_rows = torch.empty((n_rows, n_cols), dtype=y.dtype, device=y.device)
    strides = (y_rows.stride(0), dy_rows.stride(0), dx_rows.stride(0))
    if n_cols <= MAX_FUSED_COLS:
        config = launch_config(n_cols)
        grid = (triton.cdiv(n_rows, config["BLOCK_M"]),)
        softmax_backward_kernel[grid](y_rows, dy_rows, dx_rows, n_rows, n_cols, *strides, **config)
    else:
        softmax_online_backward_kernel[(n_rows,)](
            y_rows, dy_rows, dx_rows, n_cols, *strides, BLOCK_N=ONLINE_BLOCK_N, num_warps=ONLINE_NUM_WARPS
        )
    return dx_rows.view(y.shape)


def _check_input(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != DEVICE:
        raise ValueError(f"x is on {x.device}, but kernels run on {DEVICE!r} here")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; supported: {SUPPORTED_DTYPES}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (softmax runs over the last)")
    if x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: softmax over an empty last dimension is undefined")
    if x.numel() // x.shape[-1] > 2**31 - 1:  # (6)!
        raise ValueError(f"x has {x.numel() // x.shape[-1]} rows; at most 2**31 - 1 are supported")


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = _forward(x)
        ctx.save_for_backward(y)  # (1)!
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return _backward(y, dy)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension; differentiable with respect to ``x``."""
    _check_input(x)
    if x.numel() == 0:  # rows of a valid width, but no rows
        return torch.empty_like(x).requires_grad_(x.requires_grad)
    if x.requires_grad and torch.is_grad_enabled():
        return _Softmax.apply(x)
    return _forward(x)  # (2)!


# --8<-- [end:autograd]


if __name__ == "__main__":
    for n_cols in (1000, MAX_FUSED_COLS + 3001):  # the one-pass path, then the online path
        x = torch.randn(5, n_cols, device=DEVICE, requires_grad=True)
        dy = torch.randn(5, n_cols, device=DEVICE)
        y = softmax(x)
        y.backward(dy)
        x_ref = x.detach().double().requires_grad_()
        y_ref = torch.softmax(x_ref, dim=-1)
        y_ref.backward(dy.double())
        fwd_error = ((y - y_ref).norm() / y_ref.norm()).item()
        bwd_error = ((x.grad - x_ref.grad).norm() / x_ref.grad.norm()).item()
        print(f"softmax on {DEVICE}, 5×{n_cols}: forward error {fwd_error:.1e}, backward error {bwd_error:.1e}")
        assert fwd_error < 1e-5 and bwd_error < 1e-5
