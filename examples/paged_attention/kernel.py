"""Decode attention over a paged KV cache: ``softmax(q·Kᵀ·scale) · V`` for one new token per sequence.

``paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, sm_scale=None)`` takes

* ``q`` of shape (B, H, D): the new token's query, one per sequence;
* ``k_cache``, ``v_cache`` of shape (num_blocks, block_size, H_kv, D): the cache, cut into pages
  ("blocks") of ``block_size`` tokens that belong to no sequence in particular;
* ``block_table`` of shape (B, max_blocks), int32: sequence ``b``'s tokens ``t`` live in page
  ``block_table[b, t // block_size]``, row ``t % block_size``;
* ``seq_lens`` of shape (B,), int32, on the device: how many cached tokens each sequence has;

and returns (B, H, D) in q's dtype. Query head ``h`` reads key/value head ``h // (H // H_kv)``
(grouped-query attention). fp16, bf16 or fp32; D ∈ {64, 128}; block_size ∈ {16, 32, 64}.
``sm_scale`` defaults to 1/√D. A sequence of length 0 returns zeros (attention over no key is
an empty sum; we return its numerator, not a NaN).

**The caller's contract**, not checked unless ``debug=True`` (the check reads the tables on the
host, which synchronises): ``0 <= seq_lens[b] <= max_blocks * block_size``, and the first
``ceil(seq_lens[b] / block_size)`` entries of row ``b`` are page ids in ``[0, num_blocks)``.
Entries past that are never read.

**No host synchronisation**: the launcher never reads ``seq_lens`` or ``block_table`` on the host
(so the call can be captured in a CUDA graph and replayed with new lengths). The number of key
splits is chosen from the shapes alone: the batch, the KV heads, the SM count and the longest
sequence the block table can hold (or the caller's ``max_seq_len`` hint).

**Inference only**: there is no backward; inputs that require grad are refused while autograd is
recording (call it under ``torch.no_grad()``).

Kernels:

* :func:`paged_decode_kernel`: one program per (key split, KV head, sequence). Its query tile
  holds the whole group of H/H_kv query heads that share the KV head (padded to 16 rows, the
  smallest ``tl.dot``), so each K/V page is read once, not once per query head. It streams its
  split's keys in tiles of BLOCK_N tokens (one or several pages, through the block table) with
  the online softmax, and writes either the final output (one split) or fp32 partials: the
  running max, the sum and the unnormalised output.
* :func:`combine_kernel`: merges a sequence's partials by the log-sum-exp rule.

The earlier stages (one program per query head, without and with the split) are in ``stages.py``.
Run this file (``python -m examples.paged_attention.kernel``) for a quick check.
"""

from __future__ import annotations

import math

from academy import INTERPRETED
from academy.grid import sm_count
from academy.validation import check_tensor

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HEAD_DIMS = (64, 128)
BLOCK_SIZES = (16, 32, 64)
LOG2E = tl.constexpr(1.4426950408889634)
"""1 / ln 2: the kernels compute eˣ as 2^(x·LOG2E) (``exp2`` is the hardware's instruction)."""
MAX_GRID_YZ = 65535
"""CUDA's limit on the grid's second and third dimensions (heads and sequences)."""


# --8<-- [start:reference]
def gather_sequence(cache: torch.Tensor, table_row: torch.Tensor, seq_len: int) -> torch.Tensor:
    """(seq_len, H_kv, D): one sequence's keys or values, in order, gathered page by page."""
    pages = table_row[: -(-seq_len // cache.shape[1])].long()
    return cache[pages].flatten(0, 1)[:seq_len]


def reference(q, k_cache, v_cache, block_table, seq_lens, sm_scale: float | None = None) -> torch.Tensor:
    """Decode attention by the definition, one sequence at a time, in fp32 (float64 for float64 inputs).

    Each sequence's K and V are gathered from its pages, then plain softmax attention; the query heads
    of a group share one KV head. A sequence of length 0 gives zeros. Reads ``seq_lens`` on the host.
    """
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    B, H, D = q.shape
    H_kv = k_cache.shape[2]
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    out = torch.zeros(B, H, D, dtype=compute, device=q.device)
    for b, seq_len in enumerate(seq_lens.tolist()):
        if seq_len == 0:
            continue
        k = gather_sequence(k_cache, block_table[b], seq_len).to(compute)  # (L, H_kv, D)
        v = gather_sequence(v_cache, block_table[b], seq_len).to(compute)
        qg = q[b].to(compute).view(H_kv, H // H_kv, D)  # query heads grouped by their KV head
        scores = torch.einsum("kgd,lkd->kgl", qg, k) * scale
        out[b] = torch.einsum("kgl,lkd->kgd", torch.softmax(scores, dim=-1), v).reshape(H, D)
    return out.to(q.dtype)


# --8<-- [end:reference]


# --8<-- [start:bytes]
def decode_bytes(seq_lens, heads: int, kv_heads: int, head_dim: int, element_size: int) -> int:
    """The bytes one call must move: every cached K and V element of every sequence, read once
    (Σ_b seq_len_b · H_kv · D · 2 tensors · element size), plus q read and the output written.
    The block table and the lengths (4 bytes per page and per sequence) are left out: under 1%."""
    tokens = sum(int(n) for n in seq_lens)
    return (tokens * kv_heads * 2 + len(seq_lens) * heads * 2) * head_dim * element_size


# --8<-- [end:bytes]


# --8<-- [start:paged_rows]
@triton.jit
def paged_rows(table_row, tokens, valid, kv_head, stride_kb, stride_kt, stride_kh, PAGE: tl.constexpr):
    """Offsets (in elements) of the cache rows holding ``tokens`` of one sequence, for one KV head."""
    page = tl.load(table_row + tokens // PAGE, mask=valid, other=0)  # (1)!
    return page.to(tl.int64) * stride_kb + (tokens % PAGE) * stride_kt + kv_head * stride_kh  # (2)!


@triton.jit
def split_chunk(seq_len, NUM_SPLITS, MIN_SPLIT, BLOCK_N: tl.constexpr):
    """Tokens per split for this sequence: its length over NUM_SPLITS, in whole tiles, at least MIN_SPLIT."""
    chunk = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N  # (3)!
    return tl.maximum(chunk, MIN_SPLIT)  # (4)!


# --8<-- [end:paged_rows]


# --8<-- [start:decode_kernel]
@triton.jit(do_not_specialize=["NUM_SPLITS", "GROUP", "H"])
def paged_decode_kernel(
    Q,
    K_CACHE,
    V_CACHE,
    BLOCK_TABLE,
    SEQ_LENS,
    OUT,
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
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    G_PAD: tl.constexpr,
    DIRECT: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    split = tl.program_id(0)
    kv_head = tl.program_id(1)
    b = tl.program_id(2)
    seq_len = tl.load(SEQ_LENS + b)  # (1)!
    chunk = split_chunk(seq_len, NUM_SPLITS, MIN_SPLIT, BLOCK_N)
    lo = split * chunk
    hi = tl.minimum(lo + chunk, seq_len)  # (2)!
    g = tl.arange(0, G_PAD)
    heads = kv_head * GROUP + g  # (3)!
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + heads.to(tl.int64)[:, None] * stride_qh + offs_d[None, :],
        mask=(g < GROUP)[:, None],
        other=0.0,
    )
    if UPCAST:  # the interpreter's bf16 arithmetic is wrong: compute in fp32 there
        q = q.to(tl.float32)
    m_i = tl.full([G_PAD], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([G_PAD], dtype=tl.float32)
    acc = tl.zeros([G_PAD, HEAD_DIM], dtype=tl.float32)
    table_row = BLOCK_TABLE + b.to(tl.int64) * stride_bt
    for start in range(lo, hi, BLOCK_N):
        tokens = start + tl.arange(0, BLOCK_N)
        valid = tokens < hi  # (4)!
        rows = paged_rows(table_row, tokens, valid, kv_head, stride_kb, stride_kt, stride_kh, PAGE)
        k = tl.load(K_CACHE + rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0)
        v = tl.load(V_CACHE + rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # (5)!
        qk = tl.where(valid[None, :], qk * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # (6)!
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
        m_i = m_new
    if DIRECT:  # (7)!
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(
            OUT + b.to(tl.int64) * stride_ob + heads.to(tl.int64)[:, None] * stride_oh + offs_d[None, :],
            out.to(OUT.dtype.element_ty),
            mask=(g < GROUP)[:, None],
        )
    else:
        part = (b.to(tl.int64) * H + heads) * NUM_SPLITS + split  # (8)!
        if lo < hi:  # (9)!
            tl.store(M_PART + part, m_i, mask=g < GROUP)
            tl.store(L_PART + part, l_i, mask=g < GROUP)
            tl.store(ACC_PART + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=(g < GROUP)[:, None])


# --8<-- [end:decode_kernel]


# --8<-- [start:combine]
@triton.jit(do_not_specialize=["NUM_SPLITS", "H"])
def combine_kernel(
    M_PART,
    L_PART,
    ACC_PART,
    SEQ_LENS,
    OUT,
    NUM_SPLITS,
    MIN_SPLIT,
    H,
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
):
    h = tl.program_id(0)
    b = tl.program_id(1)
    seq_len = tl.load(SEQ_LENS + b)
    used = tl.cdiv(seq_len, split_chunk(seq_len, NUM_SPLITS, MIN_SPLIT, BLOCK_N))  # (1)!
    s = tl.arange(0, SPLITS_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    part = (b.to(tl.int64) * H + h) * NUM_SPLITS + s
    m = tl.load(M_PART + part, mask=s < used, other=-float("inf"))  # (2)!
    l = tl.load(L_PART + part, mask=s < used, other=0.0)
    acc = tl.load(ACC_PART + part[:, None] * HEAD_DIM + offs_d[None, :], mask=(s < used)[:, None], other=0.0)
    m_max = tl.max(m, 0)
    m_max = tl.where(m_max == -float("inf"), 0.0, m_max)  # (3)!
    w = tl.math.exp2(m - m_max)  # (4)!
    total = tl.sum(w * l, 0)
    out = tl.sum(acc * w[:, None], 0) / tl.where(total == 0.0, 1.0, total)  # (5)!
    tl.store(OUT + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh + offs_d, out.to(OUT.dtype.element_ty))


def combine(partials, seq_lens, out, num_splits: int, cfg: dict) -> torch.Tensor:
    """Launch the combine pass over (m, l, acc) partials of shapes (B, H, S), (B, H, S), (B, H, S, D)."""
    m, l, acc = partials
    B, H, D = out.shape
    combine_kernel[(H, B)](
        m,
        l,
        acc,
        seq_lens,
        out,
        num_splits,
        cfg["MIN_SPLIT"],
        H,
        out.stride(0),
        out.stride(1),
        HEAD_DIM=D,
        BLOCK_N=cfg["BLOCK_N"],
        SPLITS_PAD=triton.next_power_of_2(num_splits),
        num_warps=4,
    )
    return out


# --8<-- [end:combine]


# --8<-- [start:split_rule]
PROGRAMS_PER_SM = 4
"""The split count aims at this many programs per SM when every sequence is full length."""
MAX_SPLIT_TOKENS = 4096
"""No split of the longest possible sequence walks more keys than this: it bounds the last programs
of a batch whose lengths differ (one 128k sequence among short ones)."""
MAX_SPLITS = 64


def decode_config(head_dim: int) -> dict:
    """Tile of keys per step, warps, pipeline stages, and the shortest split (a multiple of the tile)."""
    if INTERPRETED:  # a small "GPU": small tiles and splits, so the tests cross pages and splits
        return {"BLOCK_N": 32, "MIN_SPLIT": 32, "num_warps": 4, "num_stages": 1}
    block_n = 64 if head_dim == 128 else 128
    return {"BLOCK_N": block_n, "MIN_SPLIT": 256, "num_warps": 4, "num_stages": 2}


def pick_num_splits(batch: int, programs_per_sequence: int, max_seq_len: int, min_split: int) -> int:
    """How many key splits per (sequence, program), from shapes only (never from ``seq_lens``).

    ``fill``: enough splits that the batch's full-length sequences give about PROGRAMS_PER_SM
    programs per SM (rounded, so a batch that fills the GPU gets 1). ``tail``: at least enough that
    no program walks more than MAX_SPLIT_TOKENS keys. ``useful``: no more than a sequence of
    ``max_seq_len`` keys can use, since every split holds at least ``min_split`` keys.
    """
    pairs = max(1, batch * programs_per_sequence)
    fill = int(PROGRAMS_PER_SM * sm_count() / pairs + 0.5)  # (1)!
    tail = triton.cdiv(max_seq_len, MAX_SPLIT_TOKENS)  # (2)!
    useful = triton.cdiv(max_seq_len, min_split)  # (3)!
    return max(1, min(max(fill, tail), useful, MAX_SPLITS))


def split_ranges(seq_len: int, num_splits: int, min_split: int, block_n: int) -> list[tuple[int, int]]:
    """The kernels' split bounds for one sequence, in Python: [lo, hi) of each non-empty split."""
    per_split = -(-seq_len // num_splits)
    chunk = max(-(-per_split // block_n) * block_n, min_split)
    return [(lo, min(lo + chunk, seq_len)) for lo in range(0, seq_len, chunk)]


# --8<-- [end:split_rule]


def check_inputs(q, k_cache, v_cache, block_table, seq_lens, sm_scale) -> None:
    """Device, dtypes, shapes, strides and scale; raises TypeError/ValueError saying what was expected."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t, SUPPORTED_DTYPES)
    for name, t in (("block_table", block_table), ("seq_lens", seq_lens)):
        check_tensor(name, t, (torch.int32,))
    if q.dim() != 3:
        raise ValueError(f"q must be 3-D (batch, heads, head_dim): one new token per sequence, got {tuple(q.shape)}")
    if k_cache.dim() != 4:
        raise ValueError(
            f"k_cache must be 4-D (num_blocks, block_size, kv_heads, head_dim), got shape {tuple(k_cache.shape)}"
        )
    if k_cache.shape != v_cache.shape or k_cache.stride() != v_cache.stride():
        raise ValueError(
            f"k_cache and v_cache must have one shape and one layout, got {tuple(k_cache.shape)} "
            f"strides {k_cache.stride()} and {tuple(v_cache.shape)} strides {v_cache.stride()}"
        )
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise TypeError(f"dtypes differ: q {q.dtype}, k_cache {k_cache.dtype}, v_cache {v_cache.dtype}")
    devices = {t.device for t in (q, k_cache, v_cache, block_table, seq_lens)}
    if len(devices) > 1:
        raise ValueError(f"all inputs must be on one device, got {sorted(map(str, devices))}")
    (B, H, D), (_, page, H_kv, D_kv) = q.shape, k_cache.shape
    if D_kv != D:
        raise ValueError(f"q's head_dim {D} differs from the cache's {D_kv}")
    if D not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {D}")
    if page not in BLOCK_SIZES:
        raise ValueError(f"block_size (k_cache.shape[1]) must be one of {BLOCK_SIZES}, got {page}")
    if H_kv == 0 or H % H_kv:
        raise ValueError(f"the {H} query heads must be a multiple of the {H_kv} key/value heads (grouped-query)")
    if block_table.dim() != 2 or block_table.shape[0] != B:
        raise ValueError(f"block_table must be (batch={B}, max_blocks), got shape {tuple(block_table.shape)}")
    if seq_lens.shape != (B,):
        raise ValueError(f"seq_lens must be (batch={B},), got shape {tuple(seq_lens.shape)}")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1:
        raise ValueError("q and the caches must be contiguous along head_dim (stride 1 in the last dimension)")
    if B > MAX_GRID_YZ or H_kv > MAX_GRID_YZ or H > MAX_GRID_YZ:
        raise ValueError(f"batch {B} and heads {H} must be at most {MAX_GRID_YZ}, the grid's limit")
    if sm_scale is not None and (
        isinstance(sm_scale, bool)
        or not isinstance(sm_scale, (int, float))
        or not math.isfinite(sm_scale)
        or sm_scale <= 0
    ):
        raise ValueError(f"sm_scale must be a positive finite number or None, got {sm_scale!r}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k_cache, v_cache)):
        raise ValueError(
            "paged_decode_attention is inference only (it has no backward), but an input requires grad: "
            "call it under torch.no_grad() or torch.inference_mode()"
        )


def check_tables(block_table, seq_lens, num_blocks: int, block_size: int) -> None:
    """The caller's contract, checked on the host (it synchronises): lengths fit the table, and every
    page a sequence uses is a valid block id."""
    capacity = block_table.shape[1] * block_size
    lens = seq_lens.tolist()
    if any(n < 0 or n > capacity for n in lens):
        raise ValueError(f"seq_lens must lie in [0, {capacity}] (max_blocks × block_size), got {lens}")
    for b, n in enumerate(lens):
        pages = block_table[b, : -(-n // block_size)]
        if pages.numel() and (pages.min().item() < 0 or pages.max().item() >= num_blocks):
            raise ValueError(f"sequence {b} names a block outside [0, {num_blocks}): {pages.tolist()}")


def check_options(max_seq_len, num_splits) -> None:
    for name, value, least in (("max_seq_len", max_seq_len, 0), ("num_splits", num_splits, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ValueError(f"{name} must be an int >= {least} or None, got {value!r}")
    if num_splits is not None and num_splits > MAX_SPLITS:
        raise ValueError(f"num_splits must be at most {MAX_SPLITS}, got {num_splits}")


def partial_buffers(B: int, H: int, splits: int, D: int, device) -> tuple[torch.Tensor, ...]:
    """fp32 (m, l, acc) of every split: running max (log2 units), sum, unnormalised output."""
    m = torch.empty((B, H, splits), dtype=torch.float32, device=device)
    l = torch.empty((B, H, splits), dtype=torch.float32, device=device)
    acc = torch.empty((B, H, splits, D), dtype=torch.float32, device=device)
    return m, l, acc


# --8<-- [start:launcher]
def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float | None = None,
    *,
    max_seq_len: int | None = None,
    num_splits: int | None = None,
    debug: bool = False,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache: (B, H, D) from q (B, H, D).

    ``max_seq_len``: an upper bound on ``seq_lens`` the caller knows on the host (serving engines
    track it); only the split count uses it, default ``max_blocks * block_size``. ``num_splits``
    forces the split count (``None``: :func:`pick_num_splits`). ``debug=True`` checks the caller's
    contract on the block table and lengths, at the price of a host synchronisation.
    """
    check_inputs(q, k_cache, v_cache, block_table, seq_lens, sm_scale)
    check_options(max_seq_len, num_splits)
    (B, H, D), (num_blocks, page, H_kv, _) = q.shape, k_cache.shape
    block_table, seq_lens = block_table.contiguous(), seq_lens.contiguous()  # (1)!
    if debug:
        check_tables(block_table, seq_lens, num_blocks, page)
    scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    cfg = decode_config(D)
    longest = block_table.shape[1] * page if max_seq_len is None else max_seq_len  # (2)!
    splits = num_splits or pick_num_splits(B, H_kv, longest, cfg["MIN_SPLIT"])
    group = H // H_kv
    m, l, acc = partial_buffers(B, H, splits, D, q.device) if splits > 1 else (out, out, out)  # (3)!
    paged_decode_kernel[(splits, H_kv, B)](
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        out,
        m,
        l,
        acc,
        scale * 1.4426950408889634,  # (4)!
        splits,
        cfg["MIN_SPLIT"],
        H,
        group,
        block_table.stride(0),
        q.stride(0),
        q.stride(1),
        *k_cache.stride()[:3],
        out.stride(0),
        out.stride(1),
        HEAD_DIM=D,
        PAGE=page,
        BLOCK_N=cfg["BLOCK_N"],
        G_PAD=max(16, triton.next_power_of_2(group)),  # (5)!
        DIRECT=splits == 1,
        UPCAST=INTERPRETED,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # (6)!
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    if splits > 1:
        combine((m, l, acc), seq_lens, out, splits, cfg)
    return out


# --8<-- [end:launcher]


if __name__ == "__main__":
    from academy import DEVICE

    torch.manual_seed(0)
    for dtype, page, (H, H_kv), lens in [
        (torch.float32, 16, (8, 2), [1, 16, 17, 90]),
        (torch.float16, 32, (4, 4), [0, 33, 64]),
    ]:
        D = 64
        blocks_per_seq = [-(-n // page) for n in lens]
        num_blocks = sum(blocks_per_seq) + 2
        perm = torch.randperm(num_blocks)
        table = torch.zeros(len(lens), max(blocks_per_seq), dtype=torch.int32)
        used = 0
        for b, n in enumerate(blocks_per_seq):
            table[b, :n] = perm[used : used + n]
            used += n
        k_cache = torch.randn(num_blocks, page, H_kv, D, device=DEVICE).to(dtype)
        v_cache = torch.randn(num_blocks, page, H_kv, D, device=DEVICE).to(dtype)
        q = torch.randn(len(lens), H, D, device=DEVICE).to(dtype)
        table, seq_lens = table.to(DEVICE), torch.tensor(lens, dtype=torch.int32, device=DEVICE)
        for splits in (None, 1, 3):
            out = paged_decode_attention(q, k_cache, v_cache, table, seq_lens, num_splits=splits)
            ref = reference(q.double(), k_cache.double(), v_cache.double(), table, seq_lens)
            error = ((out.double() - ref).norm() / ref.norm()).item()
            print(f"paged decode {dtype} page={page} H={H}/{H_kv} lens={lens} splits={splits}: error {error:.1e}")
            assert error < (1e-5 if dtype == torch.float32 else 1e-2)
