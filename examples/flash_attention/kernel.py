"""Attention, forward and backward: ``softmax(Q·Kᵀ·scale [+ causal mask]) · V``.

``attention(q, k, v, causal=False, sm_scale=None)`` takes ``q`` of shape
(B, H, S_q, D) and ``k``, ``v`` of shape (B, H_kv, S_k, D), fp16 or bf16,
D ∈ {64, 128, 256}, any sequence lengths (ragged ends are masked), H_kv dividing H
(grouped-query attention: query head ``h`` reads key/value head
``h // (H // H_kv)``). ``sm_scale`` defaults to 1/√D. It is differentiable.

Causal masking is **bottom-right aligned**, as in FlashAttention-2: query row
``i`` sees key ``j`` iff ``j <= i + (S_k - S_q)``, so the last query always
sees the last key (the layout of decoding with a KV cache). When S_q = S_k
that is the usual lower triangle, and it agrees with PyTorch's
``scaled_dot_product_attention(is_causal=True)``; when S_q ≠ S_k PyTorch's
flag is top-left aligned and the two differ. Query rows that see no key at
all (S_q > S_k, causal) return zeros, and their gradients are zero.

Kernels:

* :func:`attn_fwd_kernel`: one program per block of BLOCK_M query rows of one
  (batch, head), streaming over K and V in BLOCK_N blocks with the online
  softmax; the keys every row sees run in an unmasked loop, the diagonal band
  and the ragged end in a masked one. K and V come through tensor descriptors
  (TMA) on Hopper, through masked pointer loads elsewhere. It saves the
  per-row log-sum-exp for the backward.
* ``gluon_forward.attn_fwd_ws_kernel``: on Hopper, full attention at D = 128
  with both lengths multiples of 128 runs this warp-specialised forward,
  written in Gluon (a loader warp and two consumer warp groups sharing every
  K/V tile); :func:`gluon_unsupported` says why a problem goes to
  :func:`attn_fwd_kernel` instead (every problem at D = 64 or 256, among others).
  It saves the same log-sum-exp.
* :func:`attn_bwd_preprocess_kernel`: ``Δ = rowsum(dO ∘ O)``, and in the fused
  backward it clears the fp32 dQ buffer.
* ``gluon_backward.attn_bwd_ws_kernel``: on Hopper, at D = 128 with S_q a
  multiple of 64 and S_k of 128, causal or not, the backward's main kernel is
  this warp-specialised one, written in Gluon (a loader warp and two consumer
  warp groups, 64 keys each): dK and dV, and dQ added into the fp32 buffer;
  :func:`gluon_backward_unsupported` says why a problem goes to the Triton
  kernels below instead (every problem at D = 64 or 256, among others).
* :func:`attn_bwd_dkdv_kernel`: one program per block of keys of one K/V head,
  looping over every query head of its group and every query block that sees
  it: dK and dV without atomics. In the fused backward (the config table's
  choice for long sequences) it also adds the block's share of dQ into the
  fp32 buffer with atomic additions (a TMA reduction on Hopper).
* :func:`attn_bwd_dq_cast_kernel` scales and casts the fused backward's dQ buffer.
* :func:`attn_bwd_dq_kernel`: the split backward's dQ, one program per block of
  queries, looping over the keys it sees (recomputing P and dP).

Run this file (``python -m examples.flash_attention.kernel``) for a quick check.
"""

from __future__ import annotations

import functools
import importlib
import math

from academy import DEVICE, INTERPRETED
from academy.tma import TensorDescriptor, tma_available
from academy.validation import as_bool, as_real, check_tensor, once_differentiable

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
HEAD_DIMS = (64, 128, 256)
"""The head sizes the Triton kernels take (each has its rows in the config tables); the Gluon kernels take 128 only."""
PATHS = ("auto", "gluon", "tma", "pointer")
LOG2E = tl.constexpr(1.4426950408889634)
"""1 / ln 2: the kernels compute eˣ as 2^(x·LOG2E) (``exp2`` is the hardware's instruction)."""
SIZES = ["S_Q", "S_K", "H", "GROUP"]
"""Not specialised on (Triton would compile a variant per divisibility by 16 of each): one binary for every length."""
MAX_GRID_Y = 65535
"""CUDA's limit on the second grid dimension, which carries batch × heads."""


# --8<-- [start:reference]
def causal_mask(s_q: int, s_k: int, device=None) -> torch.Tensor:
    """(S_q, S_k) booleans, bottom-right aligned: row i sees key j iff j <= i + S_k - S_q."""
    i = torch.arange(s_q, device=device)[:, None]
    j = torch.arange(s_k, device=device)[None, :]
    return j <= i + (s_k - s_q)


def reference(q, k, v, causal: bool = False, sm_scale: float | None = None) -> torch.Tensor:
    """Attention by the definition, in fp32 (float64 for float64 inputs), returned in q's dtype.

    K and V heads are repeated for grouped-query attention; rows that see no key give 0.
    """
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    group = q.shape[1] // k.shape[1]
    kf = k.to(compute).repeat_interleave(group, dim=1)
    vf = v.to(compute).repeat_interleave(group, dim=1)
    scores = q.to(compute) @ kf.transpose(-1, -2) * scale
    if causal:
        mask = causal_mask(q.shape[2], k.shape[2], q.device)
        sees_a_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~mask, -math.inf).masked_fill(~sees_a_key, 0.0)  # keep empty rows finite
        p = torch.softmax(scores, dim=-1) * sees_a_key
    else:
        p = torch.softmax(scores, dim=-1)
    return (p @ vf).to(q.dtype)


# --8<-- [end:reference]


# --8<-- [start:forward_inner]
@triton.jit
def attn_fwd_inner(
    acc,
    l_i,
    m_i,
    q,
    k_src,
    v_src,
    kv_bh,
    offs_m,
    lo,
    hi,
    S_K,
    shift,
    qk_scale,
    stride_kn,
    stride_vn,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    USE_TMA: tl.constexpr,
    UPCAST: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    """One sweep of the online softmax over keys [lo, hi) in BLOCK_N blocks; all in the log2 domain."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)  # (1)!
        cols = start_n + offs_n
        if USE_TMA:
            k = k_src.load([kv_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)  # (2)!
            v = v_src.load([kv_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        else:
            k = tl.load(
                k_src + cols.to(tl.int64)[:, None] * stride_kn + offs_d[None, :], mask=(cols < S_K)[:, None], other=0.0
            )
            v = tl.load(
                v_src + cols.to(tl.int64)[:, None] * stride_vn + offs_d[None, :], mask=(cols < S_K)[:, None], other=0.0
            )
        if UPCAST:  # the interpreter's bf16 arithmetic is wrong: compute in fp32 there
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k))  # (3)!
        if MASKED:
            keep = (cols < S_K)[None, :]
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None] + shift)  # (4)!
            qk = tl.where(keep, qk * qk_scale, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            m_sub = tl.where(m_new == -float("inf"), 0.0, m_new)  # (5)!
            p = tl.math.exp2(qk - m_sub[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # (6)!
            m_sub = m_new
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_sub)  # (7)!
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)  # (8)!
        m_i = m_new
    return acc, l_i, m_i


# --8<-- [end:forward_inner]


# --8<-- [start:forward_kernel]
@triton.jit(do_not_specialize=SIZES)
def attn_fwd_kernel(
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
    stride_qb,
    stride_qh,
    stride_qm,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_ob,
    stride_oh,
    stride_om,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    USE_TMA: tl.constexpr,
    UPCAST: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    if CAUSAL:  # (1)!
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    bh = tl.program_id(1)  # (2)!
    b = bh // H
    h = bh % H
    kv_bh = b * (H // GROUP) + h // GROUP  # (3)!
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * LOG2E  # (4)!
    if USE_TMA:
        q = Q.load([bh, pid_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)  # rows past S_Q read as zeros
        k_src = K
        v_src = V
    else:
        q = tl.load(
            Q
            + b.to(tl.int64) * stride_qb
            + h.to(tl.int64) * stride_qh  # (5)!
            + offs_m.to(tl.int64)[:, None] * stride_qm
            + offs_d[None, :],
            mask=(offs_m < S_Q)[:, None],
            other=0.0,
        )
        k_src = K + b.to(tl.int64) * stride_kb + (h // GROUP).to(tl.int64) * stride_kh
        v_src = V + b.to(tl.int64) * stride_vb + (h // GROUP).to(tl.int64) * stride_vh
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)  # (6)!
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    shift = S_K - S_Q
    if CAUSAL:
        lo = tl.maximum(pid_m * BLOCK_M + shift + 1, 0) // BLOCK_N * BLOCK_N  # (7)!
        hi = tl.minimum(tl.maximum(pid_m * BLOCK_M + BLOCK_M + shift, 0), S_K)  # (8)!
    else:
        lo = S_K // BLOCK_N * BLOCK_N
        hi = S_K
    acc, l_i, m_i = attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_src,
        v_src,
        kv_bh,
        offs_m,
        0,
        lo,
        S_K,
        shift,
        qk_scale,
        stride_kn,
        stride_vn,
        False,
        CAUSAL,
        BLOCK_N,
        HEAD_DIM,
        USE_TMA,
        UPCAST,
        WARP_SPECIALIZE,
    )  # (9)!
    acc, l_i, m_i = attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_src,
        v_src,
        kv_bh,
        offs_m,
        lo,
        hi,
        S_K,
        shift,
        qk_scale,
        stride_kn,
        stride_vn,
        True,
        CAUSAL,
        BLOCK_N,
        HEAD_DIM,
        USE_TMA,
        UPCAST,
        False,
    )
    empty = l_i == 0.0  # (10)!
    acc = acc / tl.where(empty, 1.0, l_i)[:, None]  # (11)!
    lse = tl.where(empty, float("inf"), m_i + tl.math.log2(tl.where(empty, 1.0, l_i)))  # (12)!
    tl.store(LSE + bh.to(tl.int64) * S_Q + offs_m, lse, mask=offs_m < S_Q)
    if USE_TMA:
        O.store([bh, pid_m * BLOCK_M, 0], acc.to(O.dtype).reshape(1, BLOCK_M, HEAD_DIM))  # clipped at S_Q
    else:
        tl.store(
            O
            + b.to(tl.int64) * stride_ob
            + h.to(tl.int64) * stride_oh
            + offs_m.to(tl.int64)[:, None] * stride_om
            + offs_d[None, :],
            acc.to(O.dtype.element_ty),
            mask=(offs_m < S_Q)[:, None],
        )


# --8<-- [end:forward_kernel]


# --8<-- [start:backward_kernels]
@triton.jit
def attn_bwd_preprocess_kernel(
    O, DO, DELTA, DQ_ACC, S_Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, FUSE_DQ: tl.constexpr
):
    bh = tl.program_id(1)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = bh.to(tl.int64) * S_Q + offs_m
    mask = (offs_m < S_Q)[:, None]
    o = tl.load(O + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + rows, tl.sum(o * do, 1), mask=offs_m < S_Q)  # (1)!
    if FUSE_DQ:
        tl.store(
            DQ_ACC + rows[:, None] * HEAD_DIM + offs_d[None, :],  # (2)!
            tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32),
            mask=mask,
        )


@triton.jit
def bwd_dkdv_step(
    dk,
    dv,
    k,
    v,
    Q,
    DO,
    LSE,
    DELTA,
    DQ,
    bh,
    offs_n,
    lo,
    hi,
    rot,
    S_Q,
    shift,
    qk_scale,
    MASKED: tl.constexpr,
    ROTATE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    UPCAST: tl.constexpr,
    FUSE_DQ: tl.constexpr,
    DQ_TMA: tl.constexpr,
):
    """Accumulate one query head's contribution to dK and dV of a key block, over query rows [lo, hi);
    with FUSE_DQ, also add the key block's share of dQ to the fp32 accumulator."""
    offs_d = tl.arange(0, HEAD_DIM)
    n_blocks = tl.cdiv(hi - lo, BLOCK_M)
    for i in range(0, n_blocks):
        if ROTATE:
            start_m = lo + (i + rot) % n_blocks * BLOCK_M  # (3)!
        else:
            start_m = lo + i * BLOCK_M
        offs_m = start_m + tl.arange(0, BLOCK_M)
        rows = bh.to(tl.int64) * S_Q + offs_m
        in_range = offs_m < S_Q
        q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=in_range[:, None], other=0.0)
        do = tl.load(DO + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=in_range[:, None], other=0.0)
        lse = tl.load(LSE + rows, mask=in_range, other=float("inf"))  # (4)!
        delta = tl.load(DELTA + rows, mask=in_range, other=0.0)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])  # (5)!
        if MASKED:
            p_t = tl.where(offs_n[:, None] <= offs_m[None, :] + shift, p_t, 0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv)  # (6)!
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = (p_t * (dp_t - delta[None, :])).to(q.dtype)  # (7)!
        dk = tl.dot(ds_t, q, dk)
        if FUSE_DQ:
            dq = tl.dot(tl.trans(ds_t), k)  # (8)!
            if DQ_TMA:
                DQ.atomic_add([bh, start_m, 0], dq.reshape(1, BLOCK_M, HEAD_DIM))  # (9)!
            else:
                tl.atomic_add(
                    DQ + rows[:, None] * HEAD_DIM + offs_d[None, :], dq, mask=in_range[:, None], sem="relaxed"
                )
    return dk, dv


@triton.jit(do_not_specialize=SIZES)
def attn_bwd_dkdv_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    DQ,
    DK,
    DV,
    sm_scale,
    S_Q,
    S_K,
    H,
    GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    FUSE_DQ: tl.constexpr,
    DQ_TMA: tl.constexpr,
    ROTATE: tl.constexpr,
):
    pid_n = tl.program_id(0)
    kv_bh = tl.program_id(1)
    b = kv_bh // (H // GROUP)
    kv_h = kv_bh % (H // GROUP)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_rows = kv_bh.to(tl.int64) * S_K + offs_n
    k = tl.load(K + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_n < S_K)[:, None], other=0.0)
    v = tl.load(V + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_n < S_K)[:, None], other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * LOG2E
    shift = S_K - S_Q
    n0 = pid_n * BLOCK_N
    if CAUSAL:  # (10)!
        lo = tl.maximum(n0 - shift, 0) // BLOCK_M * BLOCK_M
        mid = tl.minimum(
            tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - shift, 0), BLOCK_M) * BLOCK_M, tl.cdiv(S_Q, BLOCK_M) * BLOCK_M
        )
    else:
        lo = 0
        mid = 0
    for g in range(GROUP):  # (11)!
        bh = b * H + kv_h * GROUP + g
        dk, dv = bwd_dkdv_step(
            dk,
            dv,
            k,
            v,
            Q,
            DO,
            LSE,
            DELTA,
            DQ,
            bh,
            offs_n,
            lo,
            mid,
            pid_n,
            S_Q,
            shift,
            qk_scale,
            True,
            False,
            BLOCK_M,
            HEAD_DIM,
            UPCAST,
            FUSE_DQ,
            DQ_TMA,
        )
        dk, dv = bwd_dkdv_step(
            dk,
            dv,
            k,
            v,
            Q,
            DO,
            LSE,
            DELTA,
            DQ,
            bh,
            offs_n,
            mid,
            S_Q,
            pid_n,
            S_Q,
            shift,
            qk_scale,
            False,
            ROTATE,
            BLOCK_M,
            HEAD_DIM,
            UPCAST,
            FUSE_DQ,
            DQ_TMA,
        )
    mask = (offs_n < S_K)[:, None]
    tl.store(DK + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], (dk * sm_scale).to(DK.dtype.element_ty), mask=mask)
    tl.store(DV + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], dv.to(DV.dtype.element_ty), mask=mask)


@triton.jit
def attn_bwd_dq_cast_kernel(DQ_ACC, DQ, sm_scale, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    dq = tl.load(DQ_ACC + offs, mask=offs < N, other=0.0)
    tl.store(DQ + offs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=offs < N)  # (12)!


@triton.jit
def bwd_dq_step(
    dq,
    q,
    do,
    lse,
    delta,
    K,
    V,
    kv_bh,
    offs_m,
    lo,
    hi,
    S_K,
    shift,
    qk_scale,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """Accumulate dQ of a query block over keys [lo, hi)."""
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_rows = kv_bh.to(tl.int64) * S_K + offs_n
        k = tl.load(K + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_n < S_K)[:, None], other=0.0)
        v = tl.load(V + kv_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_n < S_K)[:, None], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
        if MASKED:
            keep = (offs_n < S_K)[None, :]
            if CAUSAL:
                keep = keep & (offs_n[None, :] <= offs_m[:, None] + shift)
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)  # (13)!
    return dq


@triton.jit(do_not_specialize=SIZES)
def attn_bwd_dq_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    DQ,
    sm_scale,
    S_Q,
    S_K,
    H,
    GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
):
    bh = tl.program_id(1)
    kv_bh = (bh // H) * (H // GROUP) + (bh % H) // GROUP
    pid_m = tl.program_id(0)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = bh.to(tl.int64) * S_Q + offs_m
    in_range = offs_m < S_Q
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=in_range[:, None], other=0.0)
    do = tl.load(DO + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=in_range[:, None], other=0.0)
    lse = tl.load(LSE + rows, mask=in_range, other=float("inf"))
    delta = tl.load(DELTA + rows, mask=in_range, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * LOG2E
    shift = S_K - S_Q
    if CAUSAL:
        lo = tl.maximum(pid_m * BLOCK_M + shift + 1, 0) // BLOCK_N * BLOCK_N
        hi = tl.minimum(tl.maximum(pid_m * BLOCK_M + BLOCK_M + shift, 0), S_K)
    else:
        lo = S_K // BLOCK_N * BLOCK_N
        hi = S_K
    dq = bwd_dq_step(
        dq,
        q,
        do,
        lse,
        delta,
        K,
        V,
        kv_bh,
        offs_m,
        0,
        lo,
        S_K,
        shift,
        qk_scale,
        False,
        CAUSAL,
        BLOCK_N,
        HEAD_DIM,
        UPCAST,
    )
    dq = bwd_dq_step(
        dq,
        q,
        do,
        lse,
        delta,
        K,
        V,
        kv_bh,
        offs_m,
        lo,
        hi,
        S_K,
        shift,
        qk_scale,
        True,
        CAUSAL,
        BLOCK_N,
        HEAD_DIM,
        UPCAST,
    )
    tl.store(
        DQ + rows[:, None] * HEAD_DIM + offs_d[None, :], (dq * sm_scale).to(DQ.dtype.element_ty), mask=in_range[:, None]
    )


# --8<-- [end:backward_kernels]


# --8<-- [start:configs]
def _fwd(bm: int, bn: int, warps: int, stages: int, ws: bool = False) -> dict:
    return dict(BLOCK_M=bm, BLOCK_N=bn, WARP_SPECIALIZE=ws, num_warps=warps, num_stages=stages)


def _bwd(bm: int, bn: int, warps: int, stages: int) -> dict:
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)


def sequence_bucket(s_q: int, s_k: int) -> str:
    """The longer sequence's bucket: ``"short"`` up to 1024, ``"medium"`` up to 4096, ``"long"`` beyond."""
    s = max(s_q, s_k)
    return "short" if s <= 1024 else "medium" if s <= 4096 else "long"


SHARED_MEMORY_PER_PROGRAM = 227 * 1024
"""The most shared memory one program may take on Hopper: 228 KiB per SM, less 1 KiB the hardware keeps."""


def forward_shared_bytes(head_dim: int, config: dict, itemsize: int = 2) -> int:
    """The forward's tiles in shared memory: Q (BLOCK_M × D), and one K and one V tile (BLOCK_N × D each)
    in each of ``num_stages`` pipeline stages; fp16/bf16 by default. The compiler adds about 1 KiB of barriers."""
    rows = config["BLOCK_M"] + 2 * config["num_stages"] * config["BLOCK_N"]
    return rows * head_dim * itemsize


# The forward at head size 256 (Gemma-2, Gemma-3) is not swept on a GPU yet: its tiles are chosen to fit shared memory.
# A row of a D = 256 tile is 512 bytes, so by forward_shared_bytes:
#   64×64 tiles, 2 stages:  Q 32 KiB + 2 × (K 32 KiB + V 32 KiB) = 160 KiB
#   128×64 tiles, 2 stages: Q 64 KiB + 2 × (K 32 KiB + V 32 KiB) = 192 KiB
#   128×64 tiles, 3 stages: Q 64 KiB + 3 × 64 KiB = 256 KiB, over the 227 KiB a program may have: 2 stages
# 128-row tiles with 8 warps, as FlashAttention-2 runs this head size, except for short sequences, where
# 64-row tiles give twice the programs to fill the SMs. (At D = 128, 64×64 tiles in 3 stages take
# 16 + 3 × 32 = 112 KiB, and two programs share an SM; at D = 256 no 64-key tile fits twice.)
D256_FWD = {"short": _fwd(64, 64, 4, 2), "medium": _fwd(128, 64, 8, 2), "long": _fwd(128, 64, 8, 2)}

FWD_TABLE = {  # (1)!
    (128, True): {"short": _fwd(64, 64, 4, 3), "medium": _fwd(64, 64, 4, 3), "long": _fwd(128, 128, 8, 3)},
    (128, False): {"short": _fwd(64, 64, 4, 3), "medium": _fwd(64, 64, 4, 3), "long": _fwd(64, 64, 4, 3)},
    (64, True): {"short": _fwd(64, 64, 4, 3), "medium": _fwd(64, 64, 4, 3), "long": _fwd(64, 64, 4, 3)},
    (64, False): {
        "short": _fwd(64, 64, 4, 3),
        "medium": _fwd(128, 64, 8, 3, ws=True),
        "long": _fwd(128, 64, 8, 3, ws=True),
    },
    (256, True): D256_FWD,
    (256, False): D256_FWD,
}
"""Forward config per (head size, causal) and sequence bucket: at D = 64 and 128 the winners of a sweep timed
like the benchmark, at D = 256 the tiles that fit (above)."""

BWD_TABLE = {  # (2)!
    (True, "short"): (_bwd(32, 64, 4, 4), _bwd(128, 64, 8, 3)),
    (True, "medium"): (_bwd(64, 128, 8, 2), _bwd(128, 64, 8, 3)),
    (True, "long"): (_bwd(64, 128, 8, 2), None),
    (False, "short"): (_bwd(32, 64, 4, 4), _bwd(128, 64, 8, 3)),
    (False, "medium"): (_bwd(64, 128, 8, 2), None),
    (False, "long"): (_bwd(64, 128, 8, 2), None),
}
"""(dK/dV config, dQ config) per (causal, sequence bucket), at D = 64 and 128; a dQ config of None
means the fused backward: the dK/dV kernel adds dQ itself (atomics into an fp32 buffer)."""

# At D = 256 the backward's tiles are the winners of a sweep on an H200 (Gemma-2-9B's 16 query and 8 KV heads,
# S = 4096, causal and full, bf16): 34 dK/dV configs, then 34 dQ configs beside the best of them, then 22 fused
# ones (exploratory do_bench timings, so given in words here and on the page). 64 keys against 64-row query
# blocks (fp32 dK and dV: 128 registers a thread over 8 warps) with a dQ kernel of 128 query rows and 64-key
# blocks took well under half the time of the 32 × 32 tiles the register arithmetic alone had chosen, causal
# and full; the best fused config was about a quarter slower than that pair: its atomics add a 1 KiB fp32 dQ
# row per query per key block, twice the bytes of D = 128, so the split form stays.
D256_BWD = (_bwd(64, 64, 8, 2), _bwd(128, 64, 8, 1))
"""(dK/dV config, dQ config) at D = 256, for every causality and sequence bucket: the split backward."""

INTERPRETER_FWD = _fwd(16, 16, 4, 1)  # (3)!
INTERPRETER_BWD = (_bwd(16, 16, 4, 1), None)


def forward_config(head_dim: int, causal: bool, s_q: int, s_k: int) -> dict:
    """The forward's meta-parameters for this problem: a table lookup, no autotuning."""
    if INTERPRETED:
        return INTERPRETER_FWD
    return FWD_TABLE[head_dim, causal][sequence_bucket(s_q, s_k)]


def backward_configs(head_dim: int, causal: bool, s_q: int, s_k: int) -> tuple[dict, dict | None]:
    """(dK/dV, dQ or None for the fused backward) meta-parameters for this problem: a table lookup, no autotuning."""
    if INTERPRETED:
        return INTERPRETER_BWD
    if head_dim > 128:
        return D256_BWD
    return BWD_TABLE[causal, sequence_bucket(s_q, s_k)]


FIXED_FWD_CONFIG = dict(BLOCK_M=64, BLOCK_N=64, WARP_SPECIALIZE=False, num_warps=4, num_stages=2)
"""The untuned FlashAttention-2 stage: one textbook tile, whatever the problem (16×16 under the interpreter)."""
if INTERPRETED:
    FIXED_FWD_CONFIG = dict(FIXED_FWD_CONFIG, BLOCK_M=16, BLOCK_N=16, num_stages=1)
# --8<-- [end:configs]


# --8<-- [start:tma_check]
def _descriptor(t: torch.Tensor, rows: int) -> TensorDescriptor:
    """A (B·H, S, D) descriptor over a contiguous (B, H, S, D) tensor, read and written ``rows`` rows at a time."""
    b, h, s, d = t.shape
    return TensorDescriptor(t, shape=[b * h, s, d], strides=[s * d, d, 1], block_shape=[1, rows, d])


# --8<-- [end:tma_check]


# --8<-- [start:launcher]
def check_inputs(q, k, v, causal, sm_scale) -> tuple[bool, float | None]:
    """Checks, and returns ``causal`` and ``sm_scale`` as a Python bool and float (NumPy scalars welcome)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, SUPPORTED_DTYPES)
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, sequence, head_dim), got shape {tuple(t.shape)}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"dtypes differ: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"devices differ: q on {q.device}, k on {k.device}, v on {v.device}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    (B, H, _, D), (Bk, H_kv, S_k, Dk) = q.shape, k.shape
    if Bk != B or Dk != D:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch or head_dim")
    if D not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {D}")
    if H_kv == 0 or H % H_kv:
        raise ValueError(f"the {H} query heads must be a multiple of the {H_kv} key/value heads (grouped-query)")
    if S_k == 0:
        raise ValueError("k and v hold no keys (S_k = 0): attention over nothing is undefined")
    if B * H > MAX_GRID_Y:
        raise ValueError(f"batch × heads = {B * H} exceeds {MAX_GRID_Y}, the grid's second dimension")
    causal = as_bool("causal", causal)
    if sm_scale is not None and not (math.isfinite(scale := as_real("sm_scale", sm_scale)) and scale > 0):
        raise ValueError(f"sm_scale must be a positive finite number or None, got {sm_scale!r}")
    return causal, None if sm_scale is None else scale


def _aligned(*tensors: torch.Tensor) -> bool:
    """Whether every tensor starts 16-byte aligned, as a TMA descriptor's base address must."""
    return all(t.data_ptr() % 16 == 0 for t in tensors)


def forward_path(path: str, *tensors: torch.Tensor) -> str:
    """The Triton kernel's path: ``"tma"`` where descriptors can read the (contiguous) tensors, else ``"pointer"``.

    A contiguous view that starts at an odd element of its storage is read through pointers instead.
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    tma_ok = tma_available() and _aligned(*tensors)
    if path in ("auto", "gluon"):
        return "tma" if tma_ok else "pointer"
    if path == "tma" and not tma_ok:
        raise ValueError(
            "path='tma' needs tensor descriptors (Triton ≥ 3.4 on Hopper, or the interpreter) "
            "and 16-byte aligned tensors"
        )
    return path


@functools.cache
def _gluon(direction: str):
    """The Gluon ``"forward"`` or ``"backward"`` module, or None where this Triton has no Gluon for Hopper."""
    try:
        return importlib.import_module(f"examples.flash_attention.gluon_{direction}")
    except ImportError as missing:
        if (missing.name or "").startswith("triton"):
            return None
        raise  # a broken module of ours must fail loudly, not turn into "no Gluon here"


def _gluon_unsupported(direction: str, *tensors: torch.Tensor) -> str | None:
    """What rules out either Gluon kernel before its own shape rules: the interpreter, the Triton, the GPU."""
    if INTERPRETED:
        return "Gluon kernels do not run under the interpreter"
    if _gluon(direction) is None:
        return "this Triton has no Gluon for Hopper"
    if not tensors[0].is_cuda or torch.cuda.get_device_capability(tensors[0].device) != (9, 0):
        return "it needs a Hopper GPU (sm_90)"
    if not _aligned(*tensors):
        return "its tensor descriptors need 16-byte aligned tensors"
    return None


def gluon_unsupported(q, k, v, causal: bool) -> str | None:
    """Why the warp-specialised Gluon forward cannot take this problem, or None if it can."""
    return _gluon_unsupported("forward", q, k, v) or _gluon("forward").unsupported(q, k, causal)


def gluon_backward_unsupported(q, k, v, do) -> str | None:
    """Why the warp-specialised Gluon backward cannot take this problem, or None if it can."""
    return _gluon_unsupported("backward", q, k, v, do) or _gluon("backward").unsupported(q, k)


def _gluon_chosen(path: str, tuned_by_hand: bool, reason) -> bool:
    """Whether ``path`` sends a call to a Gluon kernel; ``reason`` (called only if needed) says why it cannot.

    ``path="gluon"`` with hand-set Triton meta-parameters, or on a problem the kernel cannot take, raises.
    """
    if path not in ("auto", "gluon"):
        return False
    if tuned_by_hand:
        if path == "gluon":
            raise ValueError("path='gluon' runs a Gluon kernel: a Triton config does not apply to it")
        return False
    why_not = reason()
    if why_not and path == "gluon":
        raise ValueError(f"path='gluon' cannot take this problem: {why_not}")
    return why_not is None


def flash_forward(q, k, v, causal: bool, sm_scale: float, path: str = "auto", config: dict | None = None):
    """Launch the forward on contiguous inputs; returns (o, lse) with lse in log2 units, (B, H, S_q) fp32.

    ``path="auto"`` takes the Gluon forward where it can (Hopper, full attention, D = 128, lengths
    multiples of 128) and the Triton kernel elsewhere; ``config`` overrides the Triton kernel's
    meta-parameters (the untuned stage uses it, and so can a tuning sweep). The Gluon kernel's tiles are
    written for D = 128: at D = 64 and 256 its ``unsupported`` names the head size, so ``"auto"`` runs the
    Triton kernel, which takes every size of ``HEAD_DIMS``, and ``"gluon"`` raises with that reason.
    """
    (B, H, S_q, D), (_, H_kv, S_k, _) = q.shape, k.shape
    if q.numel() and _gluon_chosen(path, config is not None, lambda: gluon_unsupported(q, k, v, causal)):  # (1)!
        return _gluon("forward").gluon_forward(q, k, v, sm_scale)
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S_q), dtype=torch.float32, device=q.device)
    if o.numel() == 0:
        return o, lse
    config = forward_config(D, causal, S_q, S_k) if config is None else config
    path = forward_path(path, q, k, v)
    if path == "tma":
        bm, bn = config["BLOCK_M"], config["BLOCK_N"]
        args = [_descriptor(q, bm), _descriptor(k, bn), _descriptor(v, bn), _descriptor(o, bm)]  # (2)!
    else:
        args = [q, k, v, o]
    args += [lse, sm_scale, S_q, S_k, H, H // H_kv, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3]]
    common = dict(HEAD_DIM=D, CAUSAL=causal, USE_TMA=path == "tma", UPCAST=INTERPRETED)
    attn_fwd_kernel[(triton.cdiv(S_q, config["BLOCK_M"]), B * H)](*args, **common, **config)
    return o, lse


def flash_backward(
    q, k, v, o, lse, do, causal: bool, sm_scale: float, configs: tuple | None = None, path: str = "auto"
):
    """dq, dk, dv from the saved lse (contiguous inputs): Δ = rowsum(dO∘O), then one kernel that writes
    dK and dV and adds dQ into an fp32 buffer (the Gluon kernel, or the Triton one when ``configs[1] is None``),
    or the Triton dK/dV and dQ kernels.

    ``path`` as for the forward: ``"auto"`` takes the Gluon backward where it can (Hopper, D = 128,
    S_q a multiple of 64, S_k of 128), ``"gluon"`` forces it, ``"tma"`` and ``"pointer"`` keep the
    Triton kernels. ``configs`` = (dK/dV config, dQ config or None) sets the Triton kernels' meta-parameters.
    The Gluon backward, like the forward, is written for D = 128 only: at D = 64 and 256 ``"auto"`` falls back
    to the Triton kernels (at D = 256 always the split pair, :data:`D256_BWD`).
    """
    (B, H, S_q, D), (_, H_kv, S_k, _) = q.shape, k.shape
    gluon = bool(q.numel()) and _gluon_chosen(
        path, configs is not None, lambda: gluon_backward_unsupported(q, k, v, do)
    )
    kv_cfg, q_cfg = backward_configs(D, causal, S_q, S_k) if configs is None else configs
    fused = gluon or q_cfg is None  # (3)!
    delta = torch.empty_like(lse)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dq_acc = torch.empty(q.shape, dtype=torch.float32, device=q.device) if fused else dq
    attn_bwd_preprocess_kernel[(triton.cdiv(S_q, 64), B * H)](
        o, do, delta, dq_acc, S_q, HEAD_DIM=D, BLOCK_M=64, FUSE_DQ=fused
    )
    if gluon:
        _gluon("backward").gluon_dkdv_dq(q, k, v, do, lse, delta, dq_acc, dk, dv, causal, sm_scale)
    else:
        dq_tma = fused and tma_available() and not INTERPRETED  # (4)!
        dq_arg = _descriptor(dq_acc, kv_cfg["BLOCK_M"]) if dq_tma else dq_acc
        args = (q, k, v, do, lse, delta)
        sizes = (sm_scale, S_q, S_k, H, H // H_kv)
        common = dict(HEAD_DIM=D, CAUSAL=causal, UPCAST=INTERPRETED)
        attn_bwd_dkdv_kernel[(triton.cdiv(S_k, kv_cfg["BLOCK_N"]), B * H_kv)](
            *args, dq_arg, dk, dv, *sizes, **common, FUSE_DQ=fused, DQ_TMA=dq_tma, ROTATE=fused and not causal, **kv_cfg
        )
        if not fused:
            attn_bwd_dq_kernel[(triton.cdiv(S_q, q_cfg["BLOCK_M"]), B * H)](*args, dq, *sizes, **common, **q_cfg)
    if fused and dq.numel():
        attn_bwd_dq_cast_kernel[(triton.cdiv(dq.numel(), 4096),)](dq_acc, dq, sm_scale, dq.numel(), BLOCK=4096)
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """Forward saves q, k, v, o and the per-row lse; backward recomputes P block by block from them."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, forward_fn, backward_path):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # (5)!
        o, lse = forward_fn(q, k, v, causal, sm_scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.backward_path = causal, sm_scale, backward_path
        return o

    @staticmethod
    @once_differentiable("attention")  # the backward kernels have no backward themselves
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_backward(q, k, v, o, lse, do.contiguous(), ctx.causal, ctx.sm_scale, path=ctx.backward_path)
        return dq, dk, dv, None, None, None, None


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    *,
    path: str = "auto",
) -> torch.Tensor:
    """``softmax(q·kᵀ·sm_scale [causal, bottom-right]) · v``; differentiable.

    q: (B, H, S_q, D); k, v: (B, H_kv, S_k, D) with H_kv dividing H; fp16 or bf16; D ∈ {64, 128, 256}.
    ``path`` picks the kernels: ``"auto"`` (the Gluon forward and backward where each applies, else the
    Triton kernels, the forward through TMA where it can), ``"gluon"`` (both Gluon kernels, or an error),
    ``"tma"`` or ``"pointer"`` (the Triton kernels, the forward's two paths).
    """
    causal, sm_scale = check_inputs(q, k, v, causal, sm_scale)
    if path not in PATHS:  # reject a bad path before any work
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    return FlashAttention.apply(q, k, v, causal, scale, functools.partial(flash_forward, path=path), path)


# --8<-- [end:launcher]


# --8<-- [start:flops]
def attention_flops(B: int, H: int, S_q: int, S_k: int, D: int, causal: bool = False, mode: str = "fwd") -> float:
    """FLOPs by the usual convention: 2 matmuls of 2·S_q·S_k·D each per head forward, half that when causal
    (the convention's triangle, exact only for S_q = S_k), and the backward's 5 matmuls are 2.5× the forward."""
    forward = 4.0 * B * H * S_q * S_k * D * (0.5 if causal else 1.0)
    return {"fwd": forward, "bwd": 2.5 * forward, "fwd+bwd": 3.5 * forward}[mode]


# --8<-- [end:flops]


if __name__ == "__main__":
    torch.manual_seed(0)
    for (B, H, H_kv, S_q, S_k, D), causal in [
        ((1, 2, 1, 40, 40, 64), True),
        ((2, 2, 2, 23, 37, 64), False),
        ((1, 2, 2, 37, 23, 64), True),
        ((1, 4, 1, 29, 35, 256), True),
    ]:
        q = torch.randn(B, H, S_q, D, device=DEVICE).half().requires_grad_()
        k = torch.randn(B, H_kv, S_k, D, device=DEVICE).half().requires_grad_()
        v = torch.randn(B, H_kv, S_k, D, device=DEVICE).half().requires_grad_()
        out = attention(q, k, v, causal)
        grad = torch.randn_like(out)
        out.backward(grad)
        got = [out, q.grad, k.grad, v.grad]
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref = reference(q64, k64, v64, causal)
        ref.backward(grad.double())
        for name, g, r in zip(("o", "dq", "dk", "dv"), got, [ref, q64.grad, k64.grad, v64.grad]):
            error = ((g.double() - r).norm() / r.norm()).item()
            print(f"attention B={B} H={H}/{H_kv} S={S_q}x{S_k} D={D} causal={causal} {name}: error {error:.1e}")
            assert error < 1e-2
