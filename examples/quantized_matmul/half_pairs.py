"""int4 codes straight into fp16 tensor-core operands, two per 32-bit register.

An fp16 operand register of ``mma`` holds two fp16 values. Codes ``j`` and
``j + 4`` of a packed int4 word sit exactly 16 bits apart, so one AND of the
word keeps both and one OR puts the exponent of 1024.0 above each: the two
halves then read as the fp16 numbers ``1024 + q`` (the code lands in the low
mantissa bits, where one unit is worth 1). One ``sub.f16x2`` of
``1024 + z`` leaves ``q − z``, exactly. Codes 1, 3, 5 and 7 sit four bits
higher and are not shifted down: they read as ``1024 + 16q``, and one
``fma.f16x2`` by 1/16 minus ``64 + z`` gives the same ``q − z``. Every value
on the way is an integer below 2048, which fp16 holds exactly.

Dot ``j`` of a K step therefore multiplies weight rows ``k = 8w + j + 4h``
(word ``w``, half ``h``), not consecutive ones; the activation tile's columns
are permuted to match, and the dot, a sum over k, is unchanged. The group's
scale multiplies the fp32 sum of the four dots, once per step and output,
instead of once per weight.

Used by :func:`examples.quantized_matmul.kernel.qmm_kernel` for int4 weights
and fp16 activations (``PAIRS``). The interpreter cannot run PTX: there the
two half operations are emulated in fp32, which is exact for these integers.
"""

import triton
import triton.language as tl

FP16_1024_X2 = tl.constexpr(0x64006400)
"""1024.0 in both fp16 halves of a word: exponent 10, so mantissa bit 0 is worth 1."""
FP16_SIXTEENTH_X2 = tl.constexpr(0x2C002C00)
"""1/16 in both halves."""


# --8<-- [start:half2]
@triton.jit
def _low_half(a):
    return (a & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _high_half(a):
    return (a >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _as_half2(low, high):
    """Two fp32 tensors → int32 words holding them as fp16 (low bits: ``low``)."""
    lo = low.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    hi = high.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
    return lo | (hi << 16)


@triton.jit
def splat_half2(v):
    """fp32 values (exact in fp16) → int32 words holding the value in both halves."""
    bits = v.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return bits | (bits << 16)


@triton.jit
def half2_sub(a, b, INTERPRETED: tl.constexpr):
    """``a − b`` on both fp16 halves of int32 words."""
    if INTERPRETED:
        return _as_half2(_low_half(a) - _low_half(b), _high_half(a) - _high_half(b))
    return tl.inline_asm_elementwise("sub.rn.f16x2 $0, $1, $2;", "=r,r,r", [a, b],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def half2_fma(a, b, c, INTERPRETED: tl.constexpr):
    """``a·b + c`` on both fp16 halves of int32 words."""
    if INTERPRETED:
        return _as_half2(_low_half(a) * _low_half(b) + _low_half(c), _high_half(a) * _high_half(b) + _high_half(c))
    return tl.inline_asm_elementwise("fma.rn.f16x2 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c],
                                     dtype=tl.int32, is_pure=True, pack=1)
# --8<-- [end:half2]


# --8<-- [start:pair_operand]
@triton.jit
def pair_operand(words, j: tl.constexpr, zero_1024, zero_64, INTERPRETED: tl.constexpr):
    """Dot ``j``'s weight tile (2·W, C) in fp16: row 2w + h holds ``q − z`` of code j + 4h of word w.

    ``words``: (W, C) int32, already shifted right by 8 for j = 2, 3.
    ``zero_1024``, ``zero_64``: (C,) int32 holding 1024 + z and −(64 + z) in both halves.
    """
    if j % 2 == 0:
        both = (words & 0x000F000F) | FP16_1024_X2  # (1)!
        weights = half2_sub(both, zero_1024[None, :], INTERPRETED)  # (2)!
    else:
        both = (words & 0x00F000F0) | FP16_1024_X2  # (3)!
        weights = half2_fma(both, tl.full(zero_64.shape, FP16_SIXTEENTH_X2, tl.int32)[None, :],
                            zero_64[None, :], INTERPRETED)
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
    zero_1024 = splat_half2(z + 1024.0)  # (1)!
    zero_64 = splat_half2(-(z + 64.0))
    high = words >> 8  # codes 2, 3, 6, 7 where 0, 1, 4, 5 were
    x0, x1, x2, x3 = permuted_columns(x, WORDS)
    part = _dot(x0, pair_operand(words, 0, zero_1024, zero_64, UPCAST), tl.zeros(acc.shape, tl.float32), UPCAST)
    part = _dot(x1, pair_operand(words, 1, zero_1024, zero_64, UPCAST), part, UPCAST)
    part = _dot(x2, pair_operand(high, 2, zero_1024, zero_64, UPCAST), part, UPCAST)
    part = _dot(x3, pair_operand(high, 3, zero_1024, zero_64, UPCAST), part, UPCAST)
    return acc + part * s[None, :]  # (2)!
# --8<-- [end:pairs_step]
