"""Two 16-bit weights per 32-bit register: low-bit codes straight into tensor-core operands.

A 16-bit operand register of the tensor cores holds two fp16 (or bf16)
values, one per half. This module builds such registers from packed codes
with integer AND/OR (or one byte permute, ``prmt``) and one packed
``fma.{f16x2,bf16x2}``, never converting a code on its own:

* the primitives: :func:`half2_fma`, :func:`pack_half2` and
  :func:`byte_permute`, shared by both tensor-core kernels of the chapter;
* the decode operand (:func:`pair_operand`, :func:`pairs_step`) of
  :func:`examples.quantized_matmul.kernel.qmm_kernel`, for int4 codes and fp16
  activations. Codes ``j`` and ``j + 4`` of a word sit exactly 16 bits apart,
  so one AND keeps both and one OR puts the exponent of 1024.0 above each:
  the halves read as the fp16 numbers ``1024 + q`` (the code lands in the
  mantissa's lowest bits, where one unit is worth 1), and one packed
  multiply-add by 1 with ``−(1024 + z)`` leaves ``q − z``, exactly. Codes 1,
  3, 5 and 7 are masked four bits up, read as ``1024 + 16q``, and fixed by a
  multiply-add by 1/16 with ``−(64 + z)``. Dot ``j`` of a K step then
  multiplies weight rows ``k = 8w + j + 4h``; the activation columns are
  permuted to match (a dot, a sum over k, does not change).

The interpreter cannot run PTX: there each packed operation is emulated in
fp32, which is exact for the integers involved.
"""

import triton
import triton.language as tl

FP16_1024_X2 = tl.constexpr(0x64006400)
"""1024.0 in both fp16 halves of a word: exponent 10, so mantissa bit 0 is worth 1."""
FP16_ONE_X2 = tl.constexpr(0x3C003C00)
FP16_SIXTEENTH_X2 = tl.constexpr(0x2C002C00)


# --8<-- [start:half2]
@triton.jit
def _low_half(a, DT: tl.constexpr):
    return (a & 0xFFFF).to(tl.int16).to(DT, bitcast=True).to(tl.float32)


@triton.jit
def _high_half(a, DT: tl.constexpr):
    return (a >> 16).to(tl.int16).to(DT, bitcast=True).to(tl.float32)


@triton.jit
def pack_half2(low, high, DT: tl.constexpr):
    """Two fp32 tensors → int32 words holding them rounded to ``DT`` (fp16 or bf16), ``low`` in the low bits."""
    lo = low.to(DT).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    hi = high.to(DT).to(tl.int16, bitcast=True).to(tl.int32)
    return lo | (hi << 16)


@triton.jit
def half2_fma(a, b, c, DT: tl.constexpr, INTERPRETED: tl.constexpr):
    """``a·b + c`` on both ``DT`` halves of int32 words, rounded once (``fma.rn.{f16x2,bf16x2}``).
    The emulation is exact where the fp32 ``a·b + c`` is exact before its rounding, as in every use here."""
    if INTERPRETED:
        return pack_half2(_low_half(a, DT) * _low_half(b, DT) + _low_half(c, DT),
                          _high_half(a, DT) * _high_half(b, DT) + _high_half(c, DT), DT)
    if DT == tl.float16:
        return tl.inline_asm_elementwise("fma.rn.f16x2 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c],
                                         dtype=tl.int32, is_pure=True, pack=1)
    return tl.inline_asm_elementwise("fma.rn.bf16x2 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def byte_permute(a, b, selector, INTERPRETED: tl.constexpr):
    """``prmt.b32``: byte j of the result is byte ``selector``'s nibble j of the pair (b, a)
    (0–3: a's bytes, 4–7: b's)."""
    if INTERPRETED:
        result = tl.zeros_like(a)
        for j in tl.static_range(4):
            pick = (selector >> (4 * j)) & 7
            source = tl.where(pick >= 4, b, a)
            result = result | (((source >> (8 * (pick & 3))) & 0xFF) << (8 * j))
        return result
    return tl.inline_asm_elementwise("prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, selector],
                                     dtype=tl.int32, is_pure=True, pack=1)
# --8<-- [end:half2]


# --8<-- [start:pair_operand]
@triton.jit
def pair_operand(words, j: tl.constexpr, minus_1024_z, minus_64_z, INTERPRETED: tl.constexpr):
    """Dot ``j``'s weight tile (2·W, C) in fp16: row 2w + h holds ``q − z`` of code j + 4h of word w.

    ``words``: (W, C) int32, already shifted right by 8 for j = 2, 3.
    ``minus_1024_z``, ``minus_64_z``: (C,) int32 holding −(1024 + z) and −(64 + z) in both halves.
    """
    if j % 2 == 0:
        both = (words & 0x000F000F) | FP16_1024_X2  # (1)!
        factor = tl.full(minus_1024_z.shape, FP16_ONE_X2, tl.int32)
        weights = half2_fma(both, factor[None, :], minus_1024_z[None, :], tl.float16, INTERPRETED)  # (2)!
    else:
        both = (words & 0x00F000F0) | FP16_1024_X2  # (3)!
        factor = tl.full(minus_64_z.shape, FP16_SIXTEENTH_X2, tl.int32)
        weights = half2_fma(both, factor[None, :], minus_64_z[None, :], tl.float16, INTERPRETED)
    low = weights.to(tl.int16)
    high = (weights >> 16).to(tl.int16)
    W: tl.constexpr = words.shape[0]
    C: tl.constexpr = words.shape[1]
    rows = tl.reshape(tl.permute(tl.join(low, high), (0, 2, 1)), (2 * W, C))  # (4)!
    return rows.to(tl.float16, bitcast=True)


@triton.jit
def permuted_columns(x, WORDS: tl.constexpr):
    """The four (M, 2·W) activation tiles of a K step's dots: dot j takes columns k = 8w + j + 4h at 2w + h."""
    M: tl.constexpr = x.shape[0]
    even_j, odd_j = tl.split(tl.reshape(x, (M, WORDS, 2, 2, 2)))  # k = 8w + 4h + 2a + b: split b, then a
    x0, x2 = tl.split(even_j)
    x1, x3 = tl.split(odd_j)
    return (tl.reshape(x0, (M, 2 * WORDS)), tl.reshape(x1, (M, 2 * WORDS)),
            tl.reshape(x2, (M, 2 * WORDS)), tl.reshape(x3, (M, 2 * WORDS)))
# --8<-- [end:pair_operand]


# --8<-- [start:pairs_step]
@triton.jit
def _dot(x, w, acc, UPCAST: tl.constexpr):
    if UPCAST:  # the interpreter: fp32 products, as the kernels do there
        return tl.dot(x.to(tl.float32), w.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(x, w, acc)


@triton.jit
def pairs_step(acc, x, words, s, z, WORDS: tl.constexpr, UPCAST: tl.constexpr):
    """``acc + x·Ŵᵀ`` over one K step of int4 words (W, C) and fp16 activations (M, 8·W)."""
    minus_1024_z = pack_half2(-(z + 1024.0), -(z + 1024.0), tl.float16)  # (1)!
    minus_64_z = pack_half2(-(z + 64.0), -(z + 64.0), tl.float16)
    high = words >> 8  # codes 2, 3, 6, 7 where 0, 1, 4, 5 were
    x0, x1, x2, x3 = permuted_columns(x, WORDS)
    part = _dot(x0, pair_operand(words, 0, minus_1024_z, minus_64_z, UPCAST), tl.zeros(acc.shape, tl.float32), UPCAST)
    part = _dot(x1, pair_operand(words, 1, minus_1024_z, minus_64_z, UPCAST), part, UPCAST)
    part = _dot(x2, pair_operand(high, 2, minus_1024_z, minus_64_z, UPCAST), part, UPCAST)
    part = _dot(x3, pair_operand(high, 3, minus_1024_z, minus_64_z, UPCAST), part, UPCAST)
    return acc + part * s[None, :]  # (2)!
# --8<-- [end:pairs_step]
