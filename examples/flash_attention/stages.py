"""The chapter's stages, each a differentiable ``attention(q, k, v, causal, sm_scale)``.

==================  =====================================================================
``naive``           one program per block of queries holds the whole row of scores at once:
                    one ``tl.dot`` for QKᵀ, one softmax, one ``tl.dot`` for P·V (short S only)
``flash``           FlashAttention-2: stream K and V in blocks with the online softmax, exp2,
                    causal loop split, masked blocks skipped; masked pointer loads, one
                    textbook 64×64 tile, no tuning
``academy``         (the final op) the same kernel with a tile, warps, stages and warp
                    specialisation looked up per problem in a fixed table, reading Q, K, V
                    and writing O through tensor descriptors (TMA) on Hopper; there, full
                    attention at D = 128 runs the warp-specialised Gluon forward instead
==================  =====================================================================

Every stage saves the same log2-domain log-sum-exp, so all of them share the
chapter's backward (on Hopper, the warp-specialised Gluon backward where it
applies): in a forward+backward measurement only the forward differs.
"""

from __future__ import annotations

import functools
import math

from academy import INTERPRETED

import torch
import triton
import triton.language as tl

from examples.flash_attention.kernel import (
    FIXED_FWD_CONFIG,
    LOG2E,
    FlashAttention,
    check_inputs,
    flash_forward,
)

NAIVE_MAX_ELEMENTS = 256 * 128
"""The naive kernel keeps all of K and all of V of a head on chip: S_k·D at most 32768 (64 KiB per fp16 operand)."""


# --8<-- [start:naive]
@triton.jit
def naive_attn_kernel(
    Q,
    K,
    V,
    O,
    LSE,
    sm_scale,
    S_Q,
    S_K,
    H,
    GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_S: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
):
    bh = tl.program_id(1)
    kv_bh = (bh // H) * (H // GROUP) + (bh % H) // GROUP
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_S)  # (1)!
    offs_d = tl.arange(0, HEAD_DIM)
    rows = bh.to(tl.int64) * S_Q + offs_m
    kv_rows = kv_bh.to(tl.int64) * S_K + cols
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < S_Q)[:, None], other=0.0)
    k = tl.load(K + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(cols < S_K)[:, None], other=0.0)
    v = tl.load(V + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(cols < S_K)[:, None], other=0.0)
    if UPCAST:  # the interpreter's bf16 arithmetic is wrong: compute in fp32 there
        q, k, v = q.to(tl.float32), k.to(tl.float32), v.to(tl.float32)
    s = tl.dot(q, tl.trans(k)) * (sm_scale * LOG2E)  # (2)!
    keep = (cols < S_K)[None, :]
    if CAUSAL:
        keep = keep & (cols[None, :] <= offs_m[:, None] + (S_K - S_Q))
    s = tl.where(keep, s, -float("inf"))
    m = tl.max(s, 1)
    m = tl.where(m == -float("inf"), 0.0, m)  # a row that sees no key: exp2(-inf - 0) = 0, not NaN
    p = tl.math.exp2(s - m[:, None])
    l = tl.sum(p, 1)
    o = tl.dot(p.to(v.dtype), v) / tl.where(l == 0.0, 1.0, l)[:, None]  # (3)!
    tl.store(
        LSE + rows, tl.where(l == 0.0, float("inf"), m + tl.math.log2(tl.where(l == 0.0, 1.0, l))), mask=offs_m < S_Q
    )
    tl.store(O + rows[:, None] * HEAD_DIM + offs_d[None, :], o.to(O.dtype.element_ty), mask=(offs_m < S_Q)[:, None])


def naive_forward(q, k, v, causal: bool, sm_scale: float):
    """(o, lse) with one program per 16 query rows; refuses sequences whose K and V do not fit on chip."""
    (B, H, S_q, D), (_, H_kv, S_k, _) = q.shape, k.shape
    block_s = max(16, triton.next_power_of_2(S_k))
    if block_s * D > NAIVE_MAX_ELEMENTS:
        raise ValueError(
            f"the naive kernel holds a whole row of scores: S_k·D must be at most "
            f"{NAIVE_MAX_ELEMENTS}, got {S_k}·{D} (use attention())"
        )
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S_q), dtype=torch.float32, device=q.device)
    if o.numel():
        block_m = 16
        naive_attn_kernel[(triton.cdiv(S_q, block_m), B * H)](
            q,
            k,
            v,
            o,
            lse,
            sm_scale,
            S_q,
            S_k,
            H,
            H // H_kv,
            HEAD_DIM=D,
            BLOCK_M=block_m,
            BLOCK_S=block_s,
            CAUSAL=causal,
            UPCAST=INTERPRETED,
            num_warps=4,
        )
    return o, lse


def naive_attention(q, k, v, causal: bool = False, sm_scale: float | None = None) -> torch.Tensor:
    """Stage 1: the whole row of scores in one block (S_k·D ≤ 32768); the chapter's backward."""
    causal, sm_scale = check_inputs(q, k, v, causal, sm_scale)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    return FlashAttention.apply(q, k, v, causal, scale, naive_forward, "auto")


# --8<-- [end:naive]


# --8<-- [start:flash_stages]
def flash_attention_untuned(q, k, v, causal: bool = False, sm_scale: float | None = None) -> torch.Tensor:
    """Stage 2: the FlashAttention-2 kernel with pointer loads and one fixed 64×64 tile."""
    causal, sm_scale = check_inputs(q, k, v, causal, sm_scale)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    forward = functools.partial(flash_forward, path="pointer", config=FIXED_FWD_CONFIG)
    return FlashAttention.apply(q, k, v, causal, scale, forward, "auto")


# --8<-- [end:flash_stages]


STAGES = {
    "naive": naive_attention,
    "flash": flash_attention_untuned,
}
