"""SwiGLU, element-wise: ``swiglu(gate, up) = silu(gate) · up``, forward and backward.

``swiglu(gate, up)`` equals ``F.silu(gate) * up`` for fp32, fp16 and bf16
tensors of shape ``(..., N)`` and is differentiable in both inputs.

This file also holds the **gated element-wise layer** that SwiGLU and GeGLU
share: one forward kernel and one backward kernel, each taking the activation
as a ``@triton.jit`` function (a compile-time argument), one launcher and one
``torch.autograd.Function``. ``examples/geglu`` plugs GeLU into the same layer.

* forward: read ``gate`` and ``up``, write ``out`` (3 passes over M·N values);
* backward: read ``gate``, ``up`` and ``dout``, write ``dgate`` and ``dup``
  (5 passes). The activation is recomputed from ``gate`` instead of saved,
  and the gradients go to fresh tensors: never written in place over the
  inputs, which autograd (or the caller) may still need.

Run this file (``python -m examples.swiglu.kernel``) for a quick check.
"""

from __future__ import annotations

from academy.validation import check_same, check_tensor, once_differentiable  # before triton: see contributing

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# --8<-- [start:reference]
def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """SwiGLU as PyTorch computes it, in fp32, returned in the inputs' dtype."""
    return (F.silu(gate.float()) * up.float()).to(gate.dtype)


# --8<-- [end:reference]


# --8<-- [start:silu]
@triton.jit
def silu(x):
    """silu(x) = x·σ(x), in the precision of x (fp32 in the kernels)."""
    return x * tl.sigmoid(x)  # (1)!


@triton.jit
def silu_and_grad(x):
    """silu(x) and its derivative σ(x)·(1 + x·(1 − σ(x))), sharing one σ."""
    s = tl.sigmoid(x)  # (2)!
    f = x * s
    df = s * (1.0 + x * (1.0 - s))  # (3)!
    return f, df


# --8<-- [end:silu]


# --8<-- [start:forward_kernel]
@triton.jit
def gated_forward_kernel(
    gate_ptr,
    up_ptr,
    out_ptr,
    n_cols,
    n_col_blocks,
    gate_row_stride,
    up_row_stride,
    out_row_stride,  # in elements
    ACTIVATION: tl.constexpr,  # a @triton.jit function: silu, gelu, ...
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)  # (1)!
    row = pid // n_col_blocks  # (2)!
    cols = (pid % n_col_blocks) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    g = tl.load(gate_ptr + row * gate_row_stride + cols, mask=mask).to(tl.float32)  # (3)!
    u = tl.load(up_ptr + row * up_row_stride + cols, mask=mask).to(tl.float32)
    out = ACTIVATION(g) * u  # (4)!
    tl.store(out_ptr + row * out_row_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)  # (5)!


# --8<-- [end:forward_kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def gated_backward_kernel(
    gate_ptr,
    up_ptr,
    dout_ptr,
    dgate_ptr,
    dup_ptr,
    n_cols,
    n_col_blocks,
    gate_row_stride,
    up_row_stride,
    dout_row_stride,
    dgate_row_stride,
    dup_row_stride,
    ACTIVATION_AND_GRAD: tl.constexpr,  # a @triton.jit function returning (f(x), f'(x))
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_col_blocks
    cols = (pid % n_col_blocks) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    g = tl.load(gate_ptr + row * gate_row_stride + cols, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + row * up_row_stride + cols, mask=mask).to(tl.float32)
    dout = tl.load(dout_ptr + row * dout_row_stride + cols, mask=mask).to(tl.float32)
    f, df = ACTIVATION_AND_GRAD(g)  # (1)!
    dup = dout * f  # (2)!
    dgate = dout * u * df  # (3)!
    tl.store(dgate_ptr + row * dgate_row_stride + cols, dgate.to(dgate_ptr.dtype.element_ty), mask=mask)  # (4)!
    tl.store(dup_ptr + row * dup_row_stride + cols, dup.to(dup_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:backward_kernel]


# --8<-- [start:launcher]
BLOCK_SIZE = 2048
NUM_WARPS = 8  # 2048 values over 256 threads: 8 per thread, one 16-byte load in bf16


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """View ``t`` as (rows, N) with unit column stride; copy only if that is impossible."""
    rows = t.reshape(-1, t.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def _layout(*tensors: torch.Tensor) -> tuple[list[torch.Tensor], int, int]:
    """Rows of every tensor, and (n_rows, n_cols) of the launch.

    When every tensor is contiguous the launch treats them as one long row
    (a flat 1-D walk: no half-empty block at the end of each row); otherwise
    each row is walked on its own with its own stride, so views such as
    ``x.chunk(2, dim=-1)`` are read in place without a copy."""
    if all(t.is_contiguous() for t in tensors):  # (1)!
        return [t.reshape(1, -1) for t in tensors], 1, tensors[0].numel()
    rows = [_as_rows(t) for t in tensors]
    return rows, rows[0].shape[0], rows[0].shape[1]


def _grid(n_rows: int, n_cols: int, block_size: int) -> tuple[tuple[int], int]:
    n_col_blocks = triton.cdiv(n_cols, block_size)
    return (n_rows * n_col_blocks,), n_col_blocks  # (2)!


def gated_forward(gate: torch.Tensor, up: torch.Tensor, activation) -> torch.Tensor:
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if out.numel() == 0:  # nothing to launch
        return out
    (g, u, o), n_rows, n_cols = _layout(gate, up, out)
    grid, n_col_blocks = _grid(n_rows, n_cols, BLOCK_SIZE)
    gated_forward_kernel[grid](
        g,
        u,
        o,
        n_cols,
        n_col_blocks,
        g.stride(0),
        u.stride(0),
        o.stride(0),
        ACTIVATION=activation,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=NUM_WARPS,
    )
    return out


def gated_backward(gate, up, dout, activation_and_grad) -> tuple[torch.Tensor, torch.Tensor]:
    dgate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)  # (3)!
    dup = torch.empty(up.shape, dtype=up.dtype, device=up.device)
    if dgate.numel() == 0:  # empty gradients of the inputs' shapes
        return dgate, dup
    (g, u, d, dg, du), n_rows, n_cols = _layout(gate, up, dout, dgate, dup)
    grid, n_col_blocks = _grid(n_rows, n_cols, BLOCK_SIZE)
    gated_backward_kernel[grid](
        g,
        u,
        d,
        dg,
        du,
        n_cols,
        n_col_blocks,
        g.stride(0),
        u.stride(0),
        d.stride(0),
        dg.stride(0),
        du.stride(0),
        ACTIVATION_AND_GRAD=activation_and_grad,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=NUM_WARPS,
    )
    return dgate, dup


def check_inputs(gate: torch.Tensor, up: torch.Tensor) -> None:
    check_tensor("gate", gate, SUPPORTED_DTYPES)
    check_tensor("up", up, SUPPORTED_DTYPES)
    check_same(gate, up, ("gate", "up"))
    if gate.dim() == 0:
        raise ValueError("gate and up must have at least one dimension, shape (..., N)")
    n_cols = gate.shape[-1]
    if gate.numel() > 0 and triton.cdiv(gate.numel(), BLOCK_SIZE) + gate.numel() // n_cols > 2**31 - 1:  # (4)!
        raise ValueError(f"gate has {gate.numel()} elements: too many blocks for one launch (at most 2**31 - 1)")


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class GatedUnit(torch.autograd.Function):
    """``activation(gate) · up`` with the gated layer's kernels; the activation is
    a pair of @triton.jit functions (value; value and derivative)."""

    @staticmethod
    def forward(ctx, gate, up, activation, activation_and_grad):
        ctx.save_for_backward(gate, up)  # (1)!
        ctx.activation_and_grad = activation_and_grad
        return gated_forward(gate, up, activation)

    @staticmethod
    @once_differentiable("swiglu/geglu (the gated layer)")  # (2)!
    def backward(ctx, dout):
        gate, up = ctx.saved_tensors
        dgate, dup = gated_backward(gate, up, dout, ctx.activation_and_grad)  # (3)!
        return dgate, dup, None, None


def gated(gate: torch.Tensor, up: torch.Tensor, activation, activation_and_grad) -> torch.Tensor:
    """Validate, then run forward only or through autograd."""
    check_inputs(gate, up)
    if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
        return GatedUnit.apply(gate, up, activation, activation_and_grad)
    return gated_forward(gate, up, activation)  # (4)!


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) · up`` for tensors of one shape ``(..., N)``; differentiable in both."""
    return gated(gate, up, silu, silu_and_grad)


# --8<-- [end:autograd]


if __name__ == "__main__":
    from academy import DEVICE

    x = torch.randn(5, 2 * 1001, device=DEVICE, dtype=torch.float64).float()
    for name, (gate, up) in {
        "contiguous": (x[:, :1001].contiguous(), x[:, 1001:].contiguous()),
        "chunked views": x.chunk(2, dim=-1),
    }.items():
        gate, up = gate.clone().requires_grad_(), up.clone().requires_grad_()
        dout = torch.randn(5, 1001, device=DEVICE)
        out = swiglu(gate, up)
        out.backward(dout)
        g64, u64 = gate.detach().double().requires_grad_(), up.detach().double().requires_grad_()
        ref = F.silu(g64) * u64
        ref.backward(dout.double())
        errors = [
            ((a - b).norm() / b.norm()).item() for a, b in ((out, ref), (gate.grad, g64.grad), (up.grad, u64.grad))
        ]
        print(f"swiglu on {DEVICE}, 5×1001 ({name}): errors out/dgate/dup " + " ".join(f"{e:.1e}" for e in errors))
        assert max(errors) < 1e-5
