"""The chapter's math, checked: the two fp8 formats, the scale choice, the quantisation error, why block
scales survive an outlier, the accumulation hazard and the promotion that bounds it, the byte counts."""

from academy import DEVICE
from academy.testing import random_tensor

import pytest
import torch

from examples.fp8_matmul.kernel import (
    SCALE_K,
    dequantize_fp8,
    flops,
    fp8_max,
    gamma,
    min_bytes,
    quantize_fp8,
    scale_overhead,
    unit_roundoff,
)


def test_format_limits():
    """e4m3 (OCP FP8, 'fn': no infinities): bias 7, largest 1.75·2⁸ = 448, smallest normal 2⁻⁶,
    smallest subnormal 2⁻⁹. e5m2: bias 15, largest 1.75·2¹⁵ = 57344, smallest normal 2⁻¹⁴."""
    assert fp8_max(torch.float8_e4m3fn) == 448 == 1.75 * 2**8
    assert fp8_max(torch.float8_e5m2) == 57344 == 1.75 * 2**15
    assert torch.finfo(torch.float8_e4m3fn).tiny == 2**-6
    assert torch.finfo(torch.float8_e5m2).tiny == 2**-14
    assert torch.tensor(2**-9).to(torch.float8_e4m3fn).float() == 2**-9  # the smallest subnormal
    assert unit_roundoff(torch.float8_e4m3fn) == 2**-4 and unit_roundoff(torch.float8_e5m2) == 2**-3
    # e4m3fn has no infinity: its all-ones pattern is NaN; e5m2 keeps IEEE infinities
    assert torch.tensor([0x7F], dtype=torch.uint8).view(torch.float8_e4m3fn).float().isnan().all()
    assert torch.tensor([0x7C], dtype=torch.uint8).view(torch.float8_e5m2).float().isinf().all()


@pytest.mark.parametrize("block", [(1, 128), (128, 128), (1, None), (None, None), (3, 50)])
def test_scale_maps_each_blocks_absmax_to_448_exactly(block):
    x = random_tensor((130, 300)) * torch.rand(130, 1, device=DEVICE) * 100
    codes, scales = quantize_fp8(x, block)
    bm, bk = (size or dim for size, dim in zip(block, x.shape))
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            tile = codes[i * bm : (i + 1) * bm, j * bk : (j + 1) * bk].float().abs()
            assert tile.max() == 448
    assert scales.shape == (-(-130 // bm), -(-300 // bk)) and scales.dtype == torch.float32


def test_quantisation_error_bound():
    """|x̂ − x| ≤ max(2⁻⁴·|x|, 2⁻¹⁰·s) per element: relative 2⁻⁴ in e4m3's normal range, and half the
    smallest subnormal step (2⁻⁹/2, times the block's scale) below it, with a float32 rounding of the
    division x / s on top (2⁻²⁴ relative)."""
    x = random_tensor((64, 512)) * torch.exp(4 * random_tensor((64, 1)))
    x[0, :50] *= 1e-6  # values deep in the subnormals of their block
    codes, scales = quantize_fp8(x, (1, 128))
    s = scales.double().repeat_interleave(128, dim=1)
    error = (dequantize_fp8(codes, scales) - x.double()).abs()
    bound = torch.maximum(2**-4 * x.double().abs(), 2**-10 * s) * (1 + 2**-23)
    assert (error <= bound).all()


def test_an_outlier_flushes_a_per_tensor_scale_but_not_block_scales():
    """One value of 1e6 among N(0, 1) values: with one scale for the tensor, every value below
    1e6 · 2⁻¹⁰ / 448 ≈ 0.0022 (half e4m3's smallest subnormal step) rounds to zero and the rest fall
    into the subnormals, while 1 × 128 blocks keep every other block within the bound above."""
    x = random_tensor((32, 1024))
    x[7, 300] = 1e6
    per_tensor = dequantize_fp8(*quantize_fp8(x, (None, None)), (None, None))
    codes, scales = quantize_fp8(x, (1, 128))
    blocks = dequantize_fp8(codes, scales, (1, 128))
    s = scales.double().repeat_interleave(128, dim=1)
    keep = torch.ones_like(x, dtype=torch.bool)
    keep[7, 256:384] = False
    rel = lambda y: ((y - x.double()).abs() / x.double().abs())[keep]  # noqa: E731 - a short local measure
    within = torch.maximum(2**-4 * x.double().abs(), 2**-10 * s) * (1 + 2**-23)
    assert ((blocks - x.double()).abs() <= within)[keep].all()
    assert rel(blocks).median() < 0.05
    assert (per_tensor[keep] == 0).float().mean() > 0.001  # values flushed to zero
    assert rel(per_tensor).median() > 0.1  # a typical value keeps one or two significant bits


def accumulate(terms: torch.Tensor, fraction_bits: int, promote_every: int | None) -> torch.Tensor:
    """Sum ``terms`` (float64) one at a time in an accumulator rounded to ``fraction_bits`` bits of
    significand after every addition, adding it into a float64 total every ``promote_every`` terms."""

    def rnd(v):
        m, e = torch.frexp(v)
        return torch.ldexp(torch.round(m * 2 ** (fraction_bits + 1)) / 2 ** (fraction_bits + 1), e)

    total = torch.zeros_like(terms[..., 0])
    partial = torch.zeros_like(total)
    for k in range(terms.shape[-1]):
        partial = rnd(partial + terms[..., k])
        if promote_every and (k + 1) % promote_every == 0:
            total, partial = total + partial, torch.zeros_like(partial)
    return total + partial


def test_promotion_every_128_bounds_the_accumulation_error():
    """With about 14 bits kept in the accumulator (the DeepSeek-V3 report's measurement on the
    H800), a sum of K = 4096 positive terms drifts by up to (K − 1)·u; summing 128 at a time and
    adding each partial sum into a wide accumulator keeps the drift to about 127·u, whatever K is."""
    terms = torch.rand(256, 4096, dtype=torch.float64)
    exact = terms.sum(dim=-1)
    u = 2.0**-14
    long = ((accumulate(terms, 13, None) - exact).abs() / exact).max().item()
    promoted = ((accumulate(terms, 13, SCALE_K) - exact).abs() / exact).max().item()
    assert long <= gamma(4095, u) and promoted <= gamma(127, u) + 2.0**-50
    assert long > 8 * promoted  # the drift grows with the run, and promotion cuts it


def test_error_bound_growth_is_first_order_in_the_roundings():
    """γₙ(u) ≈ n·u for n·u ≪ 1: the bound of 128 additions at 2⁻¹² is about 128/4096 = 1/32."""
    assert gamma(128, 2.0**-12) == pytest.approx(1 / 32, rel=0.04)
    assert gamma(1, 2.0**-24) == pytest.approx(2.0**-24, rel=1e-6)


def test_byte_and_flop_counts():
    """One byte per fp8 element; block scales add 4/128 of a byte per element of a and 4/128² per
    element of b."""
    assert flops(4096, 4096, 4096) == 2 * 4096**3
    M = N = K = 4096
    assert min_bytes(M, N, K) == M * K + N * K + 4 * (M * K // 128 + N * K // 128**2) + 2 * M * N
    assert scale_overhead((1, 128)) == 1 / 32 and scale_overhead((128, 128)) == 1 / 4096
