"""Answers to the attention chapter's exercises.

* ``attention_with_lse(q, k, v, causal)``: the output and the per-row
  log-sum-exp in natural-log units, from the log2 value the forward saves.
* ``merge_partials(o1, lse1, o2, lse2)``: attention over two disjoint sets of
  keys, computed separately, merged into attention over their union (the
  combine step of split-KV "flash decoding"): what the saved LSE is good for
  beyond the backward.
* ``unsafe_mask_output(s, v)``: the −1e6 mask constant of the tutorial on a
  row that sees no key, next to the −inf + guarded-max version.

``tests/flash_attention/test_exercises.py`` checks them against float64 PyTorch.
"""

from __future__ import annotations

import math

from academy.validation import check_forward_only

import torch

from examples.flash_attention.kernel import check_inputs, flash_forward


# --8<-- [start:attention_with_lse]
def attention_with_lse(q, k, v, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) with lse = log Σⱼ exp(q·kⱼ·scale) per row (natural log), −inf where a row sees no key."""
    causal, _ = check_inputs(q, k, v, causal, None)
    check_forward_only("attention_with_lse", q=q, k=k, v=v)
    o, lse2 = flash_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal, 1.0 / math.sqrt(q.shape[-1]))
    lse = lse2 * math.log(2)  # log x = log2 x · ln 2
    return o, torch.where(torch.isinf(lse2), -math.inf, lse)  # the kernel stores +inf for "no key"


# --8<-- [end:attention_with_lse]


# --8<-- [start:merge_partials]
def merge_partials(o1, lse1, o2, lse2) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over keys K1 ∪ K2 from the attention over each: weights exp(lseᵢ − lse)."""
    lse = torch.logaddexp(lse1, lse2)
    safe = torch.where(torch.isinf(lse), 0.0, lse)  # both halves empty: weights 0, not NaN
    w1 = torch.exp(lse1 - safe)[..., None]
    w2 = torch.exp(lse2 - safe)[..., None]
    return (w1 * o1.float() + w2 * o2.float()).to(o1.dtype), lse


# --8<-- [end:merge_partials]


# --8<-- [start:unsafe_mask]
def unsafe_mask_output(s: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One row block through the online softmax twice: masked scores set to −1e6 (the tutorial's constant),
    and set to −inf with the guarded max (this chapter's kernels)."""
    big = torch.where(keep, s, torch.tensor(-1.0e6, dtype=s.dtype))
    m = big.max(dim=1).values
    p = torch.exp(big - m[:, None])
    with_constant = p @ v / p.sum(dim=1, keepdim=True)  # a row with no key: uniform weights over masked keys
    inf = torch.where(keep, s, torch.tensor(-math.inf, dtype=s.dtype))
    m = inf.max(dim=1).values
    m = torch.where(torch.isinf(m), 0.0, m)
    p = torch.exp(inf - m[:, None])
    l = p.sum(dim=1, keepdim=True)
    with_guard = p @ v / torch.where(l == 0, 1.0, l)  # a row with no key: 0
    return with_constant, with_guard


# --8<-- [end:unsafe_mask]
