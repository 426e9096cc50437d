"""Answers to the cross-entropy exercises.

* ``online_logsumexp(x, block)``: sweep 1 of the kernel written in PyTorch,
  lane by lane, so the rescaling rule can be read and stepped through.
* ``row_logsumexp(x)``: a Triton kernel that returns each row's log-sum-exp
  (the number the chapter's kernel keeps between its two sweeps; the z-loss
  of PaLM penalises its square).

``tests/cross_entropy/test_exercises.py`` checks both against PyTorch.
"""

from __future__ import annotations

import academy  # noqa: F401  (sets up the interpreter before triton is imported)
from academy.validation import check_tensor

import torch
import triton
import triton.language as tl

from examples.cross_entropy.kernel import SUPPORTED_DTYPES, launch_config


# --8<-- [start:online_logsumexp]
def online_logsumexp(x: torch.Tensor, block: int) -> torch.Tensor:
    """``torch.logsumexp(x, dim=1)`` of a 2-D tensor, reading ``block`` columns at a time.

    Lane ``k`` of the running state sees columns ``k, k + block, k + 2·block, …``;
    it keeps its maximum ``m`` and ``s = Σ exp(x − m)``; a new maximum
    rescales the old sum by ``exp(m_old − m_new)``.
    """
    n_rows, n_cols = x.shape
    m = torch.full((n_rows, block), -torch.inf, dtype=x.dtype)
    s = torch.zeros((n_rows, block), dtype=x.dtype)
    for start in range(0, n_cols, block):
        chunk = torch.full((n_rows, block), -torch.inf, dtype=x.dtype)
        width = min(block, n_cols - start)
        chunk[:, :width] = x[:, start : start + width]  # padded lanes hold -inf: they add exp(-inf) = 0
        new_m = torch.maximum(m, chunk)
        safe = torch.where(new_m == -torch.inf, 0.0, new_m)  # a lane that has seen only padding
        s = s * torch.exp(m - safe) + torch.exp(chunk - safe)
        m = new_m
    row_max = m.max(dim=1).values
    return row_max + torch.log((s * torch.exp(m - row_max[:, None])).sum(dim=1))


# --8<-- [end:online_logsumexp]


# --8<-- [start:row_logsumexp]
@triton.jit
def row_logsumexp_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK_V], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_V], tl.float32)
    for start in range(0, n_cols, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        safe = tl.where(new_m == -float("inf"), 0.0, new_m)
        s = s * tl.exp(m - safe) + tl.exp(x - safe)
        m = new_m
    row_max = tl.max(m, axis=0)
    tl.store(out_ptr + row, row_max + tl.log(tl.sum(s * tl.exp(m - row_max), axis=0)))


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    """``torch.logsumexp(x.float(), dim=1)`` for a 2-D tensor with unit column stride (fp32 result)."""
    check_tensor("x", x, SUPPORTED_DTYPES)
    if x.dim() != 2 or x.shape[1] == 0:
        raise ValueError(f"x must be 2-D with at least one column, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    if x.shape[0]:
        config = launch_config(x.shape[1])
        row_logsumexp_kernel[(x.shape[0],)](
            x, out, x.shape[1], x.stride(0), BLOCK_V=config["BLOCK_V"], num_warps=config["num_warps"]
        )
    return out


# --8<-- [end:row_logsumexp]
