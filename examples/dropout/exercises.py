"""Answers to the dropout exercises.

* ``dropout_add(x, residual, p, seed)``: ``residual + dropout(x, p, seed)``
  in one kernel, as a transformer block's residual branch uses it: read two
  tensors, write one, and no mask anywhere.

``tests/dropout/test_exercises.py`` checks it against the PyTorch reference.
"""

from __future__ import annotations

from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl

from examples.dropout.kernel import BLOCK_SIZE, NUM_WARPS, check_inputs


# --8<-- [start:dropout_add]
@triton.jit
def dropout_add_kernel(x_ptr, r_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds).to(tl.float32)
    r = tl.load(r_ptr + offsets, mask=in_bounds).to(tl.float32)
    keep = tl.rand(seed, offsets) >= p  # the same mask as dropout(x, p, seed)
    out = r + tl.where(keep, x * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=in_bounds)


def dropout_add(x: torch.Tensor, residual: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """``residual + dropout(x, p, seed)`` in one pass (forward only)."""
    p, seed = check_inputs(x, p, seed)
    check_forward_only("dropout_add", x=x, residual=residual)
    if residual.shape != x.shape or residual.dtype != x.dtype or residual.device != x.device:
        raise ValueError("residual must match x in shape, dtype and device")
    x_flat, r_flat = x.contiguous().view(-1), residual.contiguous().view(-1)
    out = torch.empty(x_flat.shape, dtype=x.dtype, device=x.device)
    if x_flat.numel():
        grid = (triton.cdiv(x_flat.numel(), BLOCK_SIZE),)
        dropout_add_kernel[grid](
            x_flat,
            r_flat,
            out,
            x_flat.numel(),
            float(p),
            1.0 / (1.0 - p),
            int(seed),
            BLOCK_SIZE=BLOCK_SIZE,
            num_warps=NUM_WARPS,
        )
    return out.view(x.shape)


# --8<-- [end:dropout_add]
