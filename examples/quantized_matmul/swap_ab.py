"""The tensor-core path, 2 to ~1000 rows: the dequantised weight as the register operand.

On Hopper the tensor cores' asynchronous matrix multiply (``wgmma``) reads its
left operand A from registers or shared memory, but its right operand B only
from shared memory. ``y = x Ŵᵀ`` with ``Ŵᵀ`` as B would store every
dequantised tile to shared memory and wait for it before each product, so
dequantisation and matrix multiply would take turns. This kernel swaps the
operands and computes the transposed tile,

    yᵀ[n, m] = Σ_k Ŵ[n, k] · x[m, k]

with the weight tile ``Ŵ`` (BLOCK_N, BLOCK_K) as A, made in registers and fed
to the tensor cores from there, and ``xᵀ`` as B through shared memory like any
loaded operand. The product of one step runs asynchronously while the
registers of the next step's weights are being made. A product as narrow as
16 activation rows is a legal tensor-core shape this way round (the B side
of ``wgmma`` may be 8 to 256 wide), so the same kernel serves decode batches;
there K is split across programs (split_k.py), because a few rows make too
few output tiles to fill the GPU.

Dequantisation builds two 16-bit weights per 32-bit register (half_pairs.py's
primitives) in natural k order, codes ``2i`` and ``2i + 1`` of a word in one
register, so ``x`` needs no permutation: one byte permute puts byte ``i`` of
the word under the exponent of the magic number, one AND keeps the codes, one
packed multiply-add makes ``q − z`` and a second one the weight ``(q − z)·s``,
rounded once to x's dtype as in the other kernels (or, with ``SCALE_AFTER``,
the fp32 product of the step is scaled instead, and the weight is ``q − z``,
exact).
"""

from __future__ import annotations

from academy import INTERPRETED

import torch
import triton
import triton.language as tl

from examples.quantized_matmul.half_pairs import byte_permute, half2_fma, pack_half2
from examples.quantized_matmul.split_k import k_slices, pick_split, slice_outputs, sum_slices
from examples.tiled_matmul.kernel import grouped_tile

FP16_HIGH_NIBBLE_CLEAR = tl.constexpr(-0x000F00F1)
"""``0xFFF0FF0F`` as an int32: keeps the low nibble of the low half and the high nibble of the high half."""
FP16_ONE_SIXTEENTH = tl.constexpr(0x2C003C00)
"""(1.0, 1/16) in (low, high) fp16 halves."""
FP16_ONES = tl.constexpr(0x3C003C00)
BF16_ONES = tl.constexpr(0x3F803F80)
MINUS_ZEROS = tl.constexpr(-0x7FFF8000)
"""``0x80008000``: −0.0 in both halves, the addend that makes a packed multiply-add a plain product."""


# --8<-- [start:natural_pairs]
@triton.jit
def natural_pairs(
    words,
    s,
    z,
    BITS: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SCALE: tl.constexpr,
    DT: tl.constexpr,
    HALF_MATH: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """Words (C, W) → weights (C, BLOCK_K) in ``DT``, ``(q − z)·s`` (or ``q − z`` without ``SCALE``),
    k in natural order: register i of a word holds codes 2i and 2i + 1."""
    EPS: tl.constexpr = 32 // BITS
    PAIRS: tl.constexpr = EPS // 2
    C: tl.constexpr = words.shape[0]
    i = tl.arange(0, PAIRS)[None, None, :]
    words = words[:, :, None] + tl.zeros((1, 1, PAIRS), tl.int32)  # (C, W, pairs)
    if not HALF_MATH:  # (1)!
        low_q = (words >> (2 * BITS * i)) & ((1 << BITS) - 1)
        high_q = (words >> (2 * BITS * i + BITS)) & ((1 << BITS) - 1)
        offset = (z + 8388608.0)[:, None, None]
        low = (low_q | 0x4B000000).to(tl.float32, bitcast=True) - offset
        high = (high_q | 0x4B000000).to(tl.float32, bitcast=True) - offset
        if SCALE:
            low = low * s[:, None, None]
            high = high * s[:, None, None]
        return tl.reshape(tl.join(low.to(DT), high.to(DT)), (C, BLOCK_K))
    if BITS == 4 and DT == tl.bfloat16:  # (2)!
        both = byte_permute(words, words >> 4, i + (i + 4) * 0x100, INTERPRETED)
        both = (both & 0x000F000F) | 0x43004300
        factor = tl.full((C, 1, 1), BF16_ONES, tl.int32)
        offset = pack_half2(-(z + 128.0), -(z + 128.0), DT)
    elif BITS == 4:  # (3)!
        magic = tl.full((C, 1, 1), 0x64646464, tl.int32)
        both = byte_permute(words, magic, 0x4040 + i * 0x0101, INTERPRETED) & FP16_HIGH_NIBBLE_CLEAR
        factor = tl.full((C, 1, 1), FP16_ONE_SIXTEENTH, tl.int32)
        offset = pack_half2(-(z + 1024.0), -(z + 64.0), DT)
    else:  # (4)!
        magic = tl.full((C, 1, 1), 0x64646464, tl.int32)
        both = byte_permute(words, magic, 0x4040 + 2 * i + (2 * i + 1) * 0x100, INTERPRETED)
        factor = tl.full((C, 1, 1), FP16_ONES, tl.int32)
        offset = pack_half2(-(z + 1024.0), -(z + 1024.0), DT)
    weights = half2_fma(both, factor, offset[:, None, None], DT, INTERPRETED)  # (5)!
    if SCALE:
        weights = half2_fma(
            weights, pack_half2(s, s, DT)[:, None, None], tl.full((C, 1, 1), MINUS_ZEROS, tl.int32), DT, INTERPRETED
        )  # (6)!
    low = weights.to(tl.int16)
    high = (weights >> 16).to(tl.int16)
    return tl.reshape(tl.join(low, high), (C, BLOCK_K)).to(DT, bitcast=True)  # (7)!


# --8<-- [end:natural_pairs]


@triton.jit
def _product(w, x, acc, INTERPRETED: tl.constexpr):
    """``w·xᵀ (+ acc)``: in fp32 under the interpreter, whose 16-bit float products are unreliable."""
    if INTERPRETED:
        return tl.dot(w.to(tl.float32), tl.trans(x).to(tl.float32), acc, input_precision="ieee")
    return tl.dot(w, tl.trans(x), acc)


# --8<-- [start:swap_ab_kernel]
@triton.jit
def qmm_swap_ab_kernel(
    x_ptr,
    data_ptr,
    s_ptr,
    z_ptr,
    out_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_xm,
    stride_os,
    stride_om,
    BITS: tl.constexpr,
    GROUP: tl.constexpr,
    PER_CHANNEL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    RASTER_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    SCALE_AFTER: tl.constexpr,
    HALF_MATH: tl.constexpr,
    EVEN_K: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    EPS: tl.constexpr = 32 // BITS
    WORDS: tl.constexpr = BLOCK_K // EPS
    if RASTER_M:  # (1)!
        pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_SIZE)
    else:
        pid_n, pid_m = grouped_tile(tl.program_id(0), tl.cdiv(N, BLOCK_N), tl.cdiv(M, BLOCK_M), GROUP_SIZE)
    split = tl.program_id(1)
    k_begin = split * K_PER_SPLIT
    k_end = tl.minimum(K, k_begin + K_PER_SPLIT)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # weight rows: outputs
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # activation rows
    safe_cols = cols % N  # every load in bounds; only the store is masked
    ks = tl.arange(0, BLOCK_K)
    words = tl.arange(0, WORDS)
    d_ptrs = data_ptr + (k_begin // EPS + words).to(tl.int64)[None, :] * N + safe_cols[:, None]  # (2)!
    x_ptrs = x_ptr + (rows % M).to(tl.int64)[:, None] * stride_xm + (k_begin + ks)[None, :]
    if PER_CHANNEL:  # one scale per output: applied once, to the fp32 sum
        s = tl.load(s_ptr + safe_cols).to(tl.float32)
        z = tl.load(z_ptr + safe_cols).to(tl.float32)
    else:
        first = (k_begin // GROUP).to(tl.int64) * N + safe_cols
        s_next = tl.load(s_ptr + first)
        z_next = tl.load(z_ptr + first)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k_start in range(k_begin, k_end, BLOCK_K):
        if EVEN_K:
            packed = tl.load(d_ptrs)
            x = tl.load(x_ptrs)
        else:  # (3)!
            packed = tl.load(d_ptrs, mask=(k_start + words * EPS < k_end)[None, :], other=0)
            x = tl.load(x_ptrs, mask=(k_start + ks < k_end)[None, :], other=0.0)
        if not PER_CHANNEL:  # (4)!
            s = s_next.to(tl.float32)
            z = z_next.to(tl.float32)
            next_group = tl.minimum((k_start + BLOCK_K) // GROUP, K // GROUP - 1)
            meta = next_group.to(tl.int64) * N + safe_cols
            s_next = tl.load(s_ptr + meta)
            z_next = tl.load(z_ptr + meta)
        w = natural_pairs(
            packed,
            s,
            z,
            BITS,
            BLOCK_K,
            not (PER_CHANNEL or SCALE_AFTER),
            x_ptr.dtype.element_ty,
            HALF_MATH,
            INTERPRETED,
        )
        if SCALE_AFTER:  # (5)!
            acc += _product(w, x, None, INTERPRETED) * s[:, None]
        else:
            acc = _product(w, x, acc, INTERPRETED)  # (6)!
        d_ptrs += WORDS * N
        x_ptrs += BLOCK_K
    if PER_CHANNEL:
        acc = acc * s[:, None]
    out_ptrs = out_ptr + split.to(tl.int64) * stride_os + rows.to(tl.int64)[None, :] * stride_om + cols[:, None]  # (7)!
    mask = (cols < N)[:, None] & (rows < M)[None, :]
    if SPLIT_K == 1:
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    else:  # fp32 partial sums: split_k.py adds them
        tl.store(out_ptrs, acc, mask=mask)


# --8<-- [end:swap_ab_kernel]


# --8<-- [start:swap_ab_configs]
_BASE = dict(
    BLOCK_N=128,
    BLOCK_K=128,
    GROUP_SIZE=8,
    RASTER_M=False,
    SPLIT_K=0,
    PROGRAMS_PER_SM=2,
    SCALE_AFTER=False,
    num_warps=4,
    num_stages=3,
)
SWAP_AB_CONFIGS = {  # by the largest M a config serves; then by (bits, activation dtype) where they differ
    16: dict(_BASE, BLOCK_M=16, SCALE_AFTER=True),
    32: dict(_BASE, BLOCK_M=32),
    64: dict(_BASE, BLOCK_M=64),
    256: dict(_BASE, BLOCK_N=64, BLOCK_M=128),
    2**31: dict(_BASE, BLOCK_M=256, BLOCK_K=64, RASTER_M=True, num_warps=8),
}
"""The H100 sweeps' best (M = 2 to 128 and 1024, both weights, int4 and int8, fp16 and bf16). Up to 64 rows,
one warp group on 128 weight rows and all the activation rows, K split (``SPLIT_K = 0``: split_k.py's
``pick_split`` sizes it for about two programs per SM); up to 256 rows, 64 weight rows × 128 activation rows;
above, two warp groups on 128 × 256 and K steps of 64 (128 for int4), the tiles walked along M, where the
tiles alone fill the GPU. ``SCALE_AFTER`` scales each step's fp32 product instead of each weight, which pays where the
product tile (16 rows) is smaller than the weight tile. Two exceptions follow in ``swap_ab_config``."""


def swap_ab_config(M: int, dtype: torch.dtype, packed, overrides: dict | None = None) -> dict:
    """The config for ``M`` rows of ``dtype`` activations times ``packed`` (a QuantizedWeight)."""
    (N, K), bits = packed.shape, packed.bits
    cfg = dict(next(c for bound, c in SWAP_AB_CONFIGS.items() if M <= bound))
    if M > 256 and bits == 4:
        cfg.update(BLOCK_K=128)  # 72 KiB a stage: three fit; int8's 80 KiB do not
    if M > 256 and bits == 8:
        cfg.update(RASTER_M=False, num_stages=4)
    if INTERPRETED:
        cfg.update(BLOCK_N=16, BLOCK_M=16, BLOCK_K=64, num_stages=1)
    cfg.update(overrides or {})
    if not packed.per_channel:  # a K step never straddles two groups (both powers of two)
        cfg["BLOCK_K"] = min(cfg["BLOCK_K"], packed.group_size)
    tiles = triton.cdiv(N, cfg["BLOCK_N"]) * triton.cdiv(M, cfg["BLOCK_M"])
    return pick_split(cfg, tiles, K)


# --8<-- [end:swap_ab_configs]


def swap_ab_matmul(x: torch.Tensor, packed, out: torch.Tensor, cfg: dict) -> None:
    """``out = x @ dequantize(packed).T`` by :func:`qmm_swap_ab_kernel` (inputs already checked)."""
    (M, K), N = x.shape, packed.shape[0]
    k_per_split, split = k_slices(K, cfg["BLOCK_K"], cfg["SPLIT_K"])
    partials = slice_outputs(out, split)
    # packed half arithmetic needs the scales in x's dtype (a second rounding otherwise) and codes the magic
    # number holds exactly (bf16 holds 128 + q only for q < 128)
    half_math = packed.scales.dtype == x.dtype and not (packed.bits == 8 and x.dtype == torch.bfloat16)
    grid = (triton.cdiv(N, cfg["BLOCK_N"]) * triton.cdiv(M, cfg["BLOCK_M"]), split)
    qmm_swap_ab_kernel[grid](
        x,
        packed.data,
        packed.scales,
        packed.zeros,
        partials,
        M,
        N,
        K,
        k_per_split,
        x.stride(0),
        M * N,
        out.stride(0),
        BITS=packed.bits,
        GROUP=packed.group_size,
        PER_CHANNEL=packed.per_channel,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=cfg["BLOCK_K"],
        GROUP_SIZE=cfg["GROUP_SIZE"],
        RASTER_M=cfg["RASTER_M"],
        SPLIT_K=split,
        SCALE_AFTER=cfg["SCALE_AFTER"] and not packed.per_channel,
        HALF_MATH=half_math,
        EVEN_K=K % cfg["BLOCK_K"] == 0,
        INTERPRETED=INTERPRETED,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    sum_slices(partials, out)
