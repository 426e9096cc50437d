"""Full attention's forward on Hopper, warp-specialised, in Gluon.

Triton's language cannot express the structure that lets cuDNN run this
forward nearly as fast as a plain matrix multiply (the chapter's page says
why: CTA-wide barriers in Triton's load pipeline, a product waited for right
after its issue, and warp specialisation that hangs). Gluon, the
lower-level language that ships with Triton (``triton.experimental.gluon``),
exposes the pieces: shared-memory buffers and mbarriers, asynchronous
tensor-core products with explicit waits, and warp specialisation with
register budgets. One program here covers 2 × BLOCK_M query rows of one head:

* a **loader** warp fills two rings of K and V tiles by TMA, each buffer with a
  *full* mbarrier (the copy landed) and an *empty* one (both consumers are done
  with it);
* two **consumer** warp groups of BLOCK_M rows each share every tile: half the
  L2 traffic of one program per 64 rows. Nothing but mbarriers couples them,
  so they drift apart and one's softmax runs while the other's products do;
* within a consumer, S(j+1) = Q·K(j+1)ᵀ is issued before the softmax of S(j)
  and waited for only after P(j)·V(j) is issued (FlashAttention-3's overlap).

The math is the Triton kernel's: the online softmax in the log2 domain and the
same saved log-sum-exp, so the chapter's backward serves both. Scope: full
(non-causal) attention, head size 128, both lengths multiples of 128, a Hopper
GPU; :func:`unsupported` says why a problem is not taken, and the launcher in
``kernel.py`` falls back to the Triton kernel. Gluon does not run under the
interpreter: on a CPU this module is imported, never launched.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

LOG2E = 1.4426950408889634
BLOCK_M = 64
"""Query rows per consumer warp group (one wgmma M); a program holds two of them."""
BLOCK_N = 128
"""Keys per K/V tile."""
STAGES = 2
"""Buffers in each of the K and V rings (a scratch sweep found 2 to 4 equally fast)."""
HEAD_DIM = 128
CONSUMER_REGS = 224
"""Registers per thread of the second consumer; the default partition (the first consumer) gets 256 and
the loader 24: (256 + 224 + 24) · 128 threads is exactly what 384 threads at launch hold (168 each)."""
LOADER_REGS = 24
GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
# Newer Triton names the TMA copies async_load / async_store; Triton 3.6 has only the long names.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


# --8<-- [start:consumer]
@gluon.constexpr_function
def wgmma_layout(columns):
    """Registers of one warp group's 64-row tensor-core product with ``columns`` columns (its accumulator)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, columns, 16])


@gluon.jit
def _online_softmax(s, m_i, l_i, qk_scale, o_rows: gl.constexpr):
    """The Triton kernel's unmasked step: new running max, P = 2^(S·scale − m), rescale factor, row sums."""
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, gl.convert_layout(alpha, o_rows), m_new, l_i


@gluon.jit
def _consume(
    WG: gl.constexpr,
    o_desc,
    LSE,
    qk_scale,
    q_row0,
    n_blocks,
    q_smem,
    k_smem,
    v_smem,
    q_bars,
    k_full,
    k_empty,
    v_full,
    v_empty,
):
    dtype: gl.constexpr = o_desc.dtype
    ROWS: gl.constexpr = q_smem.shape[1]  # (1)!
    D: gl.constexpr = q_smem.shape[2]
    KEYS: gl.constexpr = k_smem.shape[1]
    RING: gl.constexpr = k_smem.shape[0]
    s_layout: gl.constexpr = wgmma_layout(KEYS)  # (2)!
    o_layout: gl.constexpr = wgmma_layout(D)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s_rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
    q = q_smem.index(WG)

    m_i = gl.full([ROWS], -float("inf"), gl.float32, layout=s_rows)
    l_i = gl.full([ROWS], 0.0, gl.float32, layout=s_rows)
    acc = gl.full([ROWS, D], 0.0, gl.float32, layout=o_layout)
    s_zero = gl.full([ROWS, KEYS], 0.0, gl.float32, layout=s_layout)

    mbarrier.wait(q_bars.index(WG), 0)
    mbarrier.wait(k_full.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False)
    mbarrier.arrive(k_empty.index(0))  # (3)!
    for j in range(n_blocks - 1):
        nxt = j + 1
        ks = nxt % RING
        vs = j % RING
        mbarrier.wait(k_full.index(ks), (nxt // RING) & 1)  # (4)!
        s_next = warpgroup_mma(q, k_smem.index(ks).permute((1, 0)), s_zero, use_acc=False, is_async=True)  # (5)!
        p, alpha, m_i, l_i = _online_softmax(s, m_i, l_i, qk_scale, o_rows)
        acc = acc * alpha[:, None]
        mbarrier.wait(v_full.index(vs), (j // RING) & 1)
        pv = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout), v_smem.index(vs), acc, is_async=True)  # (6)!
        s, acc = warpgroup_mma_wait(num_outstanding=0, deps=[s_next, pv])
        mbarrier.arrive(k_empty.index(ks))
        mbarrier.arrive(v_empty.index(vs))
    last = n_blocks - 1
    vs = last % RING
    p, alpha, m_i, l_i = _online_softmax(s, m_i, l_i, qk_scale, o_rows)
    acc = acc * alpha[:, None]
    mbarrier.wait(v_full.index(vs), (last // RING) & 1)
    acc = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout), v_smem.index(vs), acc)
    mbarrier.arrive(v_empty.index(vs))

    row0 = q_row0 + WG * ROWS
    offs_m = row0 + gl.arange(0, ROWS, layout=s_rows)  # rows of the flattened (B·H·S_q) LSE
    gl.store(LSE + offs_m, m_i + gl.log2(l_i))
    q.store((acc / gl.convert_layout(l_i, o_rows)[:, None]).to(dtype))  # (7)!
    fence_async_shared()
    tma_store(o_desc, [row0, 0], q)
    tma.store_wait(0)


@gluon.jit
def _first_consumer(
    o_desc, LSE, qk_scale, q_row0, n_blocks, q_smem, k_smem, v_smem, q_bars, k_full, k_empty, v_full, v_empty
):
    _consume(
        0, o_desc, LSE, qk_scale, q_row0, n_blocks, q_smem, k_smem, v_smem, q_bars, k_full, k_empty, v_full, v_empty
    )


@gluon.jit
def _second_consumer(
    o_desc, LSE, qk_scale, q_row0, n_blocks, q_smem, k_smem, v_smem, q_bars, k_full, k_empty, v_full, v_empty
):
    _consume(
        1, o_desc, LSE, qk_scale, q_row0, n_blocks, q_smem, k_smem, v_smem, q_bars, k_full, k_empty, v_full, v_empty
    )


# --8<-- [end:consumer]


# --8<-- [start:loader]
@gluon.jit
def _load(
    q_desc, k_desc, v_desc, q_row0, kv_row, n_blocks, q_smem, k_smem, v_smem, q_bars, k_full, k_empty, v_full, v_empty
):
    ROWS: gl.constexpr = q_smem.shape[1]
    KEYS: gl.constexpr = k_smem.shape[1]
    RING: gl.constexpr = k_smem.shape[0]
    for wg in gl.static_range(2):
        mbarrier.expect(q_bars.index(wg), q_desc.block_type.nbytes)
        tma_load(q_desc, [q_row0 + wg * ROWS, 0], q_bars.index(wg), q_smem.index(wg))
    for j in range(n_blocks):
        slot = j % RING
        free = ((j // RING) & 1) ^ 1  # (1)!
        mbarrier.wait(k_empty.index(slot), free)
        mbarrier.expect(k_full.index(slot), k_desc.block_type.nbytes)
        tma_load(k_desc, [kv_row + j * KEYS, 0], k_full.index(slot), k_smem.index(slot))
        mbarrier.wait(v_empty.index(slot), free)
        mbarrier.expect(v_full.index(slot), v_desc.block_type.nbytes)
        tma_load(v_desc, [kv_row + j * KEYS, 0], v_full.index(slot), v_smem.index(slot))


# --8<-- [end:loader]


# --8<-- [start:kernel]
@gluon.jit
def attn_fwd_ws_kernel(
    q_desc,
    k_desc,
    v_desc,
    o_desc,
    LSE,
    qk_scale,
    S_Q,
    S_K,
    H,
    GROUP,
    RING: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    LOADER_REGS: gl.constexpr,
):
    ROWS: gl.constexpr = q_desc.block_type.shape[0]
    KEYS: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    bh = gl.program_id(1)
    kv_bh = (bh // H) * (H // GROUP) + (bh % H) // GROUP
    q_row0 = bh * S_Q + gl.program_id(0) * (2 * ROWS)  # (1)!
    kv_row = kv_bh * S_K
    n_blocks = S_K // KEYS
    dtype: gl.constexpr = q_desc.dtype

    q_smem = gl.allocate_shared_memory(dtype, [2, ROWS, D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [RING, KEYS, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [RING, KEYS, D], v_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_full = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    v_full = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    for wg in gl.static_range(2):
        mbarrier.init(q_bars.index(wg), count=1)
    for slot in gl.static_range(RING):
        mbarrier.init(k_full.index(slot), count=1)  # the loader's expect, completed by the copy's bytes
        mbarrier.init(k_empty.index(slot), count=2)  # one arrival per consumer
        mbarrier.init(v_full.index(slot), count=1)
        mbarrier.init(v_empty.index(slot), count=2)
    fence_async_shared()

    consumer_args = (
        o_desc,
        LSE,
        qk_scale,
        q_row0,
        n_blocks,
        q_smem,
        k_smem,
        v_smem,
        q_bars,
        k_full,
        k_empty,
        v_full,
        v_empty,
    )
    loader_args = (
        q_desc,
        k_desc,
        v_desc,
        q_row0,
        kv_row,
        n_blocks,
        q_smem,
        k_smem,
        v_smem,
        q_bars,
        k_full,
        k_empty,
        v_full,
        v_empty,
    )
    gl.warp_specialize(
        [(_first_consumer, consumer_args), (_second_consumer, consumer_args), (_load, loader_args)],
        [4, 1],
        [CONSUMER_REGS, LOADER_REGS],
    )  # (2)!


# --8<-- [end:kernel]


# --8<-- [start:launcher]
def unsupported(q: torch.Tensor, k: torch.Tensor, causal: bool) -> str | None:
    """Why this kernel does not take the problem (contiguous, validated inputs), or None if it does."""
    (_, _, s_q, d), s_k = q.shape, k.shape[2]
    if causal:
        return "causal attention runs on the Triton kernel"
    if d != HEAD_DIM:
        return f"head_dim {HEAD_DIM} only, got {d}"
    if s_q % (2 * BLOCK_M) or s_k % BLOCK_N or s_k == 0:
        return f"both sequence lengths must be positive multiples of {BLOCK_N}, got {s_q} and {s_k}"
    return None


def row_descriptor(t: torch.Tensor, rows: int) -> TensorDescriptor:
    """A 2-D descriptor over the (B·H·S, D) rows of a contiguous (B, H, S, D) tensor."""
    flat = t.view(-1, t.shape[-1])
    layout = gl.NVMMASharedLayout.get_default_for([rows, flat.shape[1]], GL_DTYPES[t.dtype])
    return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, flat.shape[1]], layout)


def gluon_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float):
    """(o, lse) for contiguous, 16-byte aligned inputs that :func:`unsupported` accepts; lse in log2 units."""
    (B, H, S_q, _), (_, H_kv, S_k, _) = q.shape, k.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S_q), dtype=torch.float32, device=q.device)
    attn_fwd_ws_kernel[(S_q // (2 * BLOCK_M), B * H)](
        row_descriptor(q, BLOCK_M),
        row_descriptor(k, BLOCK_N),
        row_descriptor(v, BLOCK_N),
        row_descriptor(o, BLOCK_M),
        lse,
        sm_scale * LOG2E,
        S_q,
        S_k,
        H,
        H // H_kv,
        RING=STAGES,
        CONSUMER_REGS=CONSUMER_REGS,
        LOADER_REGS=LOADER_REGS,
        num_warps=4,
    )
    return o, lse


# --8<-- [end:launcher]
