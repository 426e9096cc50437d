"""Two 16-bit weights per 32-bit register: the packed-half primitives of the tensor-core kernel.

A 16-bit operand register of the tensor cores holds two fp16 (or bf16)
values, one per half. swap_ab.py builds such registers from packed codes
with integer AND/OR (or one byte permute, ``prmt``) and packed
``fma.{f16x2,bf16x2}``, never converting a code on its own. The three
primitives it needs are here: :func:`half2_fma`, :func:`pack_half2` and
:func:`byte_permute`.

The interpreter cannot run PTX: there each packed operation is emulated in
fp32, which is exact for the integers involved.
"""

import triton
import triton.language as tl


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
        return pack_half2(
            _low_half(a, DT) * _low_half(b, DT) + _low_half(c, DT),
            _high_half(a, DT) * _high_half(b, DT) + _high_half(c, DT),
            DT,
        )
    if DT == tl.float16:
        return tl.inline_asm_elementwise(
            "fma.rn.f16x2 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32, is_pure=True, pack=1
        )
    return tl.inline_asm_elementwise(
        "fma.rn.bf16x2 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32, is_pure=True, pack=1
    )


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
    return tl.inline_asm_elementwise(
        "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, selector], dtype=tl.int32, is_pure=True, pack=1
    )


# --8<-- [end:half2]
