"""The chapter's earlier stages, each a complete ``paged_decode_attention(q, k_cache, v_cache, block_table,
seq_lens, sm_scale=None)`` with the final op's checks and results.

==============  ==========================================================================
``per_head``    one program per (sequence, query head) walks all of the sequence's keys,
                tile by tile through the block table, with the online softmax
``split``       flash-decoding: the same program per query head, but each sequence's keys
                are split over several programs, which write fp32 partials (max, sum,
                unnormalised output) that a second kernel merges
(the final op)  ``kernel.paged_decode_attention``: one program per (split, KV head)
                handles every query head of the group, so each K/V page is read once
==============  ==========================================================================

The per-head kernels compute scores and the weighted sum of values with element-wise products and
sums in fp32 (one query row is too thin for ``tl.dot``, whose smallest tile has 16 rows).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from examples.paged_attention.kernel import (
    check_inputs,
    combine,
    decode_config,
    paged_rows,
    partial_buffers,
    pick_num_splits,
    split_chunk,
)


# --8<-- [start:per_head]
@triton.jit(do_not_specialize=["H", "GROUP"])
def per_head_decode_kernel(
    Q,
    K_CACHE,
    V_CACHE,
    BLOCK_TABLE,
    SEQ_LENS,
    OUT,
    qk_scale,
    H,
    GROUP,
    stride_bt,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    h = tl.program_id(0)  # (1)!
    b = tl.program_id(1)
    kv_head = h // GROUP
    seq_len = tl.load(SEQ_LENS + b)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh + offs_d).to(tl.float32)
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    table_row = BLOCK_TABLE + b.to(tl.int64) * stride_bt
    for start in range(0, seq_len, BLOCK_N):
        tokens = start + tl.arange(0, BLOCK_N)
        valid = tokens < seq_len
        rows = paged_rows(table_row, tokens, valid, kv_head, stride_kb, stride_kt, stride_kh, PAGE)  # (2)!
        k = tl.load(K_CACHE + rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
        v = tl.load(V_CACHE + rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
        qk = tl.where(valid, tl.sum(k * q[None, :], 1) * qk_scale, -float("inf"))  # (3)!
        m_new = tl.maximum(m_i, tl.max(qk, 0))
        p = tl.math.exp2(qk - m_new)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)  # (4)!
    tl.store(OUT + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh + offs_d, out.to(OUT.dtype.element_ty))


def per_head_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale=None) -> torch.Tensor:
    """Stage 1: one program per (sequence, query head), no split."""
    check_inputs(q, k_cache, v_cache, block_table, seq_lens, sm_scale)
    (B, H, D), (_, page, H_kv, _) = q.shape, k_cache.shape
    block_table, seq_lens = block_table.contiguous(), seq_lens.contiguous()
    scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    if out.numel():
        cfg = decode_config(D)
        per_head_decode_kernel[(H, B)](
            q,
            k_cache,
            v_cache,
            block_table,
            seq_lens,
            out,
            scale * 1.4426950408889634,
            H,
            H // H_kv,
            block_table.stride(0),
            q.stride(0),
            q.stride(1),
            *k_cache.stride()[:3],
            out.stride(0),
            out.stride(1),
            HEAD_DIM=D,
            PAGE=page,
            BLOCK_N=cfg["BLOCK_N"],
            num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"],
        )
    return out


# --8<-- [end:per_head]


# --8<-- [start:split]
@triton.jit(do_not_specialize=["NUM_SPLITS", "H", "GROUP"])
def split_decode_kernel(
    Q,
    K_CACHE,
    V_CACHE,
    BLOCK_TABLE,
    SEQ_LENS,
    M_PART,
    L_PART,
    ACC_PART,
    qk_scale,
    NUM_SPLITS,
    MIN_SPLIT,
    H,
    GROUP,
    stride_bt,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kt,
    stride_kh,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    split = tl.program_id(0)  # (1)!
    h = tl.program_id(1)
    b = tl.program_id(2)
    kv_head = h // GROUP
    seq_len = tl.load(SEQ_LENS + b)
    chunk = split_chunk(seq_len, NUM_SPLITS, MIN_SPLIT, BLOCK_N)
    lo = split * chunk
    hi = tl.minimum(lo + chunk, seq_len)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh + offs_d).to(tl.float32)
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    table_row = BLOCK_TABLE + b.to(tl.int64) * stride_bt
    for start in range(lo, hi, BLOCK_N):  # (2)!
        tokens = start + tl.arange(0, BLOCK_N)
        valid = tokens < hi
        rows = paged_rows(table_row, tokens, valid, kv_head, stride_kb, stride_kt, stride_kh, PAGE)
        k = tl.load(K_CACHE + rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
        v = tl.load(V_CACHE + rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
        qk = tl.where(valid, tl.sum(k * q[None, :], 1) * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 0))
        p = tl.math.exp2(qk - m_new)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new
    part = (b.to(tl.int64) * H + h) * NUM_SPLITS + split
    if lo < hi:  # (3)!
        tl.store(M_PART + part, m_i)
        tl.store(L_PART + part, l_i)
        tl.store(ACC_PART + part * HEAD_DIM + offs_d, acc)


def split_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale=None) -> torch.Tensor:
    """Stage 2: flash-decoding per query head: split the keys, then merge the partials."""
    check_inputs(q, k_cache, v_cache, block_table, seq_lens, sm_scale)
    (B, H, D), (_, page, H_kv, _) = q.shape, k_cache.shape
    block_table, seq_lens = block_table.contiguous(), seq_lens.contiguous()
    scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    cfg = decode_config(D)
    splits = pick_num_splits(B, H, block_table.shape[1] * page, cfg["MIN_SPLIT"])  # (4)!
    m, l, acc = partial_buffers(B, H, splits, D, q.device)
    split_decode_kernel[(splits, H, B)](
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        m,
        l,
        acc,
        scale * 1.4426950408889634,
        splits,
        cfg["MIN_SPLIT"],
        H,
        H // H_kv,
        block_table.stride(0),
        q.stride(0),
        q.stride(1),
        *k_cache.stride()[:3],
        HEAD_DIM=D,
        PAGE=page,
        BLOCK_N=cfg["BLOCK_N"],
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    return combine((m, l, acc), seq_lens, out, splits, cfg)  # (5)!


# --8<-- [end:split]


STAGES = {
    "per_head": per_head_decode,
    "split": split_decode,
}
