"""Attention's backward on Hopper, warp-specialised, in Gluon: dK, dV, and dQ by atomics.

The Triton dK/dV kernel (``kernel.py``) holds a 128-key block's dK and dV
accumulators, K and V, and the step's scores and their gradient in registers
at once: 255 registers a thread with spills, and every product waited for
right after its issue. This kernel splits the same work the way the Gluon
forward splits its own. One program owns a block of KEYS = 128 keys of one
K/V head:

* a **loader** warp copies the program's K and V once, then streams the
  query blocks that see them (Q and dO, 64 rows each) through two-deep rings
  by TMA, each buffer with a *full* and an *empty* mbarrier;
* two **consumer** warp groups each own 64 of the keys: dK and dV for those
  keys stay in their registers for the whole loop (64 + 64 registers a thread
  instead of 128 + 128), K and V stay in shared memory;
* each step's dS tile is written once to shared memory, where it is both
  warp groups' operand for dQ = dS·K: each computes half of dQ's columns and
  adds them into the fp32 dQ buffer with atomic additions.

The math is the Triton backward's (the chapter's page derives it): P from
the forward's saved log2-domain log-sum-exp, Δ = rowsum(dO ∘ O) from the
preprocess kernel, dV += Pᵀ·dO, dS = P ∘ (dP − Δ), dK += dSᵀ·Q, dQ += dS·K.
Scope: head size 128, S_q a multiple of 64 and S_k of 128, a Hopper GPU,
causal or not; :func:`unsupported` says why a problem is not taken, and
``kernel.py`` falls back to the Triton kernels. On a CPU this module is
imported, never launched.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from examples.flash_attention.gluon_forward import HEAD_DIM, LOG2E, row_descriptor, tma_load, wgmma_layout

KEYS = 128
"""Keys per program, 64 per consumer warp group (one wgmma M each)."""
ROWS = 64
"""Query rows per step."""
STAGES = 2
"""Buffers in each of the Q and dO rings (three timed slower in scratch, causal most)."""
CONSUMER_REGS = 240
"""Registers per thread of the second consumer. The default partition (the first consumer) gets what the
workers leave of the 168 × 384 at launch: 504 − 240 − 24 = 240, the same."""
LOADER_REGS = 24
# Triton 3.6 calls the partition-wide barrier thread_barrier; newer Triton calls it barrier.
_partition_barrier = getattr(gl, "thread_barrier", None) or gl.barrier


# --8<-- [start:consumer]
@gluon.jit
def _query_row(step, bh0, S_Q, lo, blocks_per_head, M: gl.constexpr):
    """The flattened (B·H·S_q) row where step ``step`` starts: query head bh0 + step // blocks_per_head."""
    return (bh0 + step // blocks_per_head) * S_Q + lo + step % blocks_per_head * M


@gluon.jit
def _consume(
    WG: gl.constexpr,
    LSE,
    DELTA,
    DQ,
    DK,
    DV,
    qk_scale,
    sm_scale,
    S_Q,
    shift,
    n0,
    kv_row,
    bh0,
    lo,
    blocks_per_head,
    n_steps,
    k_smem,
    v_smem,
    q_smem,
    do_smem,
    ds_smem,
    kv_bar,
    q_full,
    q_empty,
    do_full,
    do_empty,
    ds_ready,
    CAUSAL: gl.constexpr,
):
    dtype: gl.constexpr = k_smem.dtype
    HALF: gl.constexpr = k_smem.shape[0] // 2
    D: gl.constexpr = k_smem.shape[1]
    M: gl.constexpr = q_smem.shape[1]
    RING: gl.constexpr = q_smem.shape[0]
    st_layout: gl.constexpr = wgmma_layout(M)  # (1)!
    grad_layout: gl.constexpr = wgmma_layout(D)
    dq_layout: gl.constexpr = wgmma_layout(HALF)
    lhs_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=grad_layout, k_width=2)
    query_cols: gl.constexpr = gl.SliceLayout(0, st_layout)

    k_mine = k_smem.slice(WG * HALF, HALF, dim=0)  # (2)!
    v_mine = v_smem.slice(WG * HALF, HALF, dim=0)
    k_for_dq = k_smem.slice(WG * HALF, HALF, dim=1)  # (3)!
    dk = gl.full([HALF, D], 0.0, gl.float32, layout=grad_layout)
    dv = gl.full([HALF, D], 0.0, gl.float32, layout=grad_layout)
    st_zero = gl.full([HALF, M], 0.0, gl.float32, layout=st_layout)
    dq_zero = gl.full([M, HALF], 0.0, gl.float32, layout=dq_layout)
    offs_m = gl.arange(0, M, layout=query_cols)
    my_keys = n0 + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, st_layout))
    dq_offs = (
        gl.arange(0, M, layout=gl.SliceLayout(1, dq_layout))[:, None] * D
        + WG * HALF
        + gl.arange(0, HALF, layout=gl.SliceLayout(0, dq_layout))[None, :]
    )

    mbarrier.wait(kv_bar, 0)
    for step in range(n_steps):
        slot = step % RING
        phase = (step // RING) & 1
        ds_buf = step % 2
        row = _query_row(step, bh0, S_Q, lo, blocks_per_head, M)
        lse = gl.load(LSE + row + offs_m)  # (4)!
        delta = gl.load(DELTA + row + offs_m)

        mbarrier.wait(q_full.index(slot), phase)
        s_t = warpgroup_mma(k_mine, q_smem.index(slot).permute((1, 0)), st_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_full.index(slot), phase)
        dp_t = warpgroup_mma(v_mine, do_smem.index(slot).permute((1, 0)), st_zero, use_acc=False, is_async=True)  # (5)!
        s_t = warpgroup_mma_wait(num_outstanding=1, deps=[s_t])
        p_t = gl.exp2(s_t * qk_scale - lse[None, :])  # (6)!
        if CAUSAL:
            start_m = lo + step % blocks_per_head * M
            if start_m + shift < n0 + WG * HALF + HALF - 1:  # (7)!
                p_t = gl.where(my_keys[:, None] <= (start_m + offs_m)[None, :] + shift, p_t, 0.0)
        dv = warpgroup_mma(gl.convert_layout(p_t.to(dtype), lhs_layout), do_smem.index(slot), dv, is_async=True)  # (8)!
        dp_t = warpgroup_mma_wait(num_outstanding=1, deps=[dp_t])
        ds_t = (p_t * (dp_t - delta[None, :])).to(dtype)  # (9)!
        dk = warpgroup_mma(gl.convert_layout(ds_t, lhs_layout), q_smem.index(slot), dk, is_async=True)

        ds_smem.index(ds_buf).slice(WG * HALF, HALF, dim=0).store(ds_t)  # (10)!
        fence_async_shared()
        _partition_barrier()
        mbarrier.arrive(ds_ready.index(ds_buf))
        mbarrier.wait(ds_ready.index(ds_buf), (step // 2) & 1)
        dq = warpgroup_mma(
            ds_smem.index(ds_buf).permute((1, 0)), k_for_dq, dq_zero, use_acc=False, is_async=True
        )  # (11)!
        dq, dk, dv = warpgroup_mma_wait(num_outstanding=0, deps=[dq, dk, dv])
        mbarrier.arrive(q_empty.index(slot))
        mbarrier.arrive(do_empty.index(slot))
        gl.atomic_add(DQ + row.to(gl.int64) * D + dq_offs, dq, sem="relaxed")  # (12)!

    rows = kv_row + n0 + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, grad_layout))
    offs = rows.to(gl.int64)[:, None] * D + gl.arange(0, D, layout=gl.SliceLayout(0, grad_layout))[None, :]
    gl.store(DK + offs, (dk * sm_scale).to(dtype))
    gl.store(DV + offs, dv.to(dtype))


@gluon.jit
def _first_consumer(
    LSE,
    DELTA,
    DQ,
    DK,
    DV,
    qk_scale,
    sm_scale,
    S_Q,
    shift,
    n0,
    kv_row,
    bh0,
    lo,
    blocks_per_head,
    n_steps,
    k_smem,
    v_smem,
    q_smem,
    do_smem,
    ds_smem,
    kv_bar,
    q_full,
    q_empty,
    do_full,
    do_empty,
    ds_ready,
    CAUSAL: gl.constexpr,
):
    _consume(
        0,
        LSE,
        DELTA,
        DQ,
        DK,
        DV,
        qk_scale,
        sm_scale,
        S_Q,
        shift,
        n0,
        kv_row,
        bh0,
        lo,
        blocks_per_head,
        n_steps,
        k_smem,
        v_smem,
        q_smem,
        do_smem,
        ds_smem,
        kv_bar,
        q_full,
        q_empty,
        do_full,
        do_empty,
        ds_ready,
        CAUSAL,
    )


@gluon.jit
def _second_consumer(
    LSE,
    DELTA,
    DQ,
    DK,
    DV,
    qk_scale,
    sm_scale,
    S_Q,
    shift,
    n0,
    kv_row,
    bh0,
    lo,
    blocks_per_head,
    n_steps,
    k_smem,
    v_smem,
    q_smem,
    do_smem,
    ds_smem,
    kv_bar,
    q_full,
    q_empty,
    do_full,
    do_empty,
    ds_ready,
    CAUSAL: gl.constexpr,
):
    _consume(
        1,
        LSE,
        DELTA,
        DQ,
        DK,
        DV,
        qk_scale,
        sm_scale,
        S_Q,
        shift,
        n0,
        kv_row,
        bh0,
        lo,
        blocks_per_head,
        n_steps,
        k_smem,
        v_smem,
        q_smem,
        do_smem,
        ds_smem,
        kv_bar,
        q_full,
        q_empty,
        do_full,
        do_empty,
        ds_ready,
        CAUSAL,
    )


# --8<-- [end:consumer]


# --8<-- [start:loader]
@gluon.jit
def _load(
    k_desc,
    v_desc,
    q_desc,
    do_desc,
    S_Q,
    n0,
    kv_row,
    bh0,
    lo,
    blocks_per_head,
    n_steps,
    k_smem,
    v_smem,
    q_smem,
    do_smem,
    kv_bar,
    q_full,
    q_empty,
    do_full,
    do_empty,
):
    M: gl.constexpr = q_smem.shape[1]
    RING: gl.constexpr = q_smem.shape[0]
    mbarrier.expect(kv_bar, 2 * k_desc.block_type.nbytes)
    tma_load(k_desc, [kv_row + n0, 0], kv_bar, k_smem)
    tma_load(v_desc, [kv_row + n0, 0], kv_bar, v_smem)
    for step in range(n_steps):
        slot = step % RING
        free = ((step // RING) & 1) ^ 1
        row = _query_row(step, bh0, S_Q, lo, blocks_per_head, M)
        mbarrier.wait(q_empty.index(slot), free)
        mbarrier.expect(q_full.index(slot), q_desc.block_type.nbytes)
        tma_load(q_desc, [row, 0], q_full.index(slot), q_smem.index(slot))
        mbarrier.wait(do_empty.index(slot), free)
        mbarrier.expect(do_full.index(slot), do_desc.block_type.nbytes)
        tma_load(do_desc, [row, 0], do_full.index(slot), do_smem.index(slot))


# --8<-- [end:loader]


# --8<-- [start:kernel]
@gluon.jit
def attn_bwd_ws_kernel(
    k_desc,
    v_desc,
    q_desc,
    do_desc,
    LSE,
    DELTA,
    DQ,
    DK,
    DV,
    qk_scale,
    sm_scale,
    S_Q,
    S_K,
    H,
    GROUP,
    CAUSAL: gl.constexpr,
    RING: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    LOADER_REGS: gl.constexpr,
):
    N: gl.constexpr = k_desc.block_type.shape[0]
    M: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    n0 = gl.program_id(0) * N
    kv_bh = gl.program_id(1)
    kv_row = kv_bh * S_K
    bh0 = (kv_bh // (H // GROUP)) * H + (kv_bh % (H // GROUP)) * GROUP  # (1)!
    shift = S_K - S_Q
    if CAUSAL:
        lo = gl.maximum(n0 - shift, 0) // M * M  # (2)!
    else:
        lo = 0
    blocks_per_head = (S_Q - lo) // M
    n_steps = GROUP * blocks_per_head

    k_smem = gl.allocate_shared_memory(dtype, [N, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [N, D], v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [RING, M, D], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [RING, M, D], do_desc.layout)
    ds_smem = gl.allocate_shared_memory(dtype, [2, N, M], gl.NVMMASharedLayout.get_default_for([N, M], dtype))
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_full = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    do_full = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for slot in gl.static_range(RING):
        mbarrier.init(q_full.index(slot), count=1)
        mbarrier.init(q_empty.index(slot), count=2)  # one arrival per consumer
        mbarrier.init(do_full.index(slot), count=1)
        mbarrier.init(do_empty.index(slot), count=2)
    for buf in gl.static_range(2):
        mbarrier.init(ds_ready.index(buf), count=2)  # (3)!
    fence_async_shared()

    consumer_args = (
        LSE,
        DELTA,
        DQ,
        DK,
        DV,
        qk_scale,
        sm_scale,
        S_Q,
        shift,
        n0,
        kv_row,
        bh0,
        lo,
        blocks_per_head,
        n_steps,
        k_smem,
        v_smem,
        q_smem,
        do_smem,
        ds_smem,
        kv_bar,
        q_full,
        q_empty,
        do_full,
        do_empty,
        ds_ready,
        CAUSAL,
    )
    loader_args = (
        k_desc,
        v_desc,
        q_desc,
        do_desc,
        S_Q,
        n0,
        kv_row,
        bh0,
        lo,
        blocks_per_head,
        n_steps,
        k_smem,
        v_smem,
        q_smem,
        do_smem,
        kv_bar,
        q_full,
        q_empty,
        do_full,
        do_empty,
    )
    gl.warp_specialize(
        [(_first_consumer, consumer_args), (_second_consumer, consumer_args), (_load, loader_args)],
        [4, 1],
        [CONSUMER_REGS, LOADER_REGS],
    )


# --8<-- [end:kernel]


# --8<-- [start:launcher]
def unsupported(q: torch.Tensor, k: torch.Tensor) -> str | None:
    """Why this kernel does not take the problem (contiguous, validated inputs), or None if it does."""
    (_, _, s_q, d), s_k = q.shape, k.shape[2]
    if d != HEAD_DIM:
        return f"head_dim {HEAD_DIM} only, got {d}"
    if s_q == 0 or s_q % ROWS or s_k % KEYS:
        return f"S_q must be a positive multiple of {ROWS} and S_k of {KEYS}, got {s_q} and {s_k}"
    return None


def gluon_dkdv_dq(q, k, v, do, lse, delta, dq_acc, dk, dv, causal: bool, sm_scale: float) -> None:
    """Write dk and dv, and add dS·K (dQ before its sm_scale factor) into the zeroed fp32 ``dq_acc``.

    Contiguous tensors that :func:`unsupported` accepts; ``lse`` in log2 units, ``delta`` = rowsum(dO ∘ O).
    """
    (B, H, S_q, _), (_, H_kv, S_k, _) = q.shape, k.shape
    attn_bwd_ws_kernel[(S_k // KEYS, B * H_kv)](
        row_descriptor(k, KEYS),
        row_descriptor(v, KEYS),
        row_descriptor(q, ROWS),
        row_descriptor(do, ROWS),
        lse,
        delta,
        dq_acc,
        dk,
        dv,
        sm_scale * LOG2E,
        sm_scale,
        S_q,
        S_k,
        H,
        H // H_kv,
        CAUSAL=causal,
        RING=STAGES,
        CONSUMER_REGS=CONSUMER_REGS,
        LOADER_REGS=LOADER_REGS,
        num_warps=4,
    )


# --8<-- [end:launcher]
