"""The exercises' answers: power-of-two scales, the transpose of a 128 × 128-block weight, e4m3 against
e5m2."""

from academy import DEVICE
from academy.testing import random_tensor

import pytest
import torch

from examples.fp8_matmul.exercises import quantization_error, quantize_fp8_pow2, transpose_quantized
from examples.fp8_matmul.kernel import dequantize_fp8, quantize_fp8


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_power_of_two_scales(block):
    x = random_tensor((150, 260)) * 37
    codes, scales = quantize_fp8_pow2(x, block)
    assert torch.equal(torch.exp2(torch.log2(scales).round()), scales)  # powers of two
    bm, bk = block
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            top = codes[i * bm : (i + 1) * bm, j * bk : (j + 1) * bk].float().abs().max()
            assert 224 <= top <= 448  # within one binade of e4m3's largest value (224 only by rounding down)
    # a code times a power of two is exact in float32: dequantising in float32 and in float64 agree
    full = scales.repeat_interleave(bm, dim=0).repeat_interleave(bk, dim=1)[:150, :260]
    assert torch.equal((codes.float() * full).double(), dequantize_fp8(codes, scales, block))


def test_transpose_keeps_the_scales():
    w = random_tensor((300, 200))
    codes, scales = quantize_fp8(w, (128, 128))
    codes_t, scales_t = transpose_quantized(codes, scales)
    want_codes, want_scales = quantize_fp8(w.T.contiguous(), (128, 128))
    assert torch.equal(codes_t.view(torch.uint8), want_codes.view(torch.uint8))
    assert torch.equal(scales_t, want_scales)
    # 1 × 128 blocks do not transpose: the blocks of wᵀ are columns of w, a different grouping
    _, row_scales = quantize_fp8(w, (1, 128))
    _, col_scales = quantize_fp8(w.T.contiguous(), (1, 128))
    assert row_scales.shape != col_scales.shape


def test_e4m3_beats_e5m2_inside_its_range():
    """Block-scaled N(0, 1) data: one more significand bit halves the error (about 2× apart)."""
    x = random_tensor((64, 1024))
    e4m3 = quantization_error(x, (1, 128), torch.float8_e4m3fn)
    e5m2 = quantization_error(x, (1, 128), torch.float8_e5m2)
    assert 1.6 < e5m2 / e4m3 < 2.4


def test_e5m2_wins_when_a_block_spans_more_than_e4m3_can():
    """A block whose magnitudes span 2⁻²⁰ to 1: e4m3's range below its largest value is 448 / 2⁻⁹ ≈ 2¹⁸
    (its smallest subnormal), e5m2's 57344 / 2⁻¹⁶ ≈ 2³², so e5m2 keeps the small values that e4m3 flushes."""
    x = torch.exp2(-20 * torch.rand(16, 1024, device=DEVICE)) * torch.sign(random_tensor((16, 1024)))
    assert x.count_nonzero() == x.numel()
    rel = {}
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        codes, scales = quantize_fp8(x, (1, 128), dtype)
        x_hat = dequantize_fp8(codes, scales)
        assert torch.isfinite(x_hat).all(), f"{dtype}: {(~torch.isfinite(x_hat)).sum().item()} codes not finite"
        rel[dtype] = ((x_hat - x.double()).abs() / x.double().abs()).mean().item()
    assert rel[torch.float8_e5m2] < rel[torch.float8_e4m3fn]
