"""The page's quantisation algebra, checked on random weights in float64.

* Rounding to the grid moves each weight by at most half a step: |ŵ − w| ≤ s/2.
* A dot product of K such errors is bounded by (s/2)·Σ|x| (all errors aligned),
  and for independent uniform errors its RMS is s·‖x‖/√12, which grows as √K.
* The four dequantisation modes (shift, scale, scale-and-shift, fused
  multiply-add with −z·s precomputed) give the same weights, exactly in fp32.
* The GEMV's shift-free unpacking (a code read in place as a subnormal float) is exact.
* The memory-bound speed-up bound is the ratio of the bytes.
"""

import math

from academy.testing import random_tensor, unit_roundoff

import pytest
import torch

from examples.quantized_matmul.kernel import (
    decode_bytes,
    dequantize,
    quantization_error_bound,
    quantization_error_rms,
    quantize,
    speedup_bound,
    unpack,
)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits, group", [(4, 32), (4, 128), (8, 64), (4, None), (8, None)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_rounding_error_is_at_most_half_a_step(bits, group, symmetric, dtype):
    w = random_tensor((64, 256), dtype) * 3
    packed = quantize(w, bits, group, symmetric)
    step = packed.scales.double().repeat_interleave(packed.group_size, dim=0).T  # (N, K)
    dequantized = dequantize(packed).double()
    error = (dequantized - w.double()).abs()
    # fp16/bf16 scales make (q − z)·s exact in fp32; fp32 scales round that product once, by ≤ 2⁻²⁴ of it
    product_rounding = dequantized.abs() * unit_roundoff(torch.float32) if dtype == torch.float32 else 0.0
    bound = step / 2 * (1 + 1e-9) + product_rounding
    assert (error <= bound).all(), f"worst {((error - bound) / step).max().item():.3g} steps past the bound"
    assert (error / step).max() > 0.45  # and the bound is tight: some weight sits almost half a step away


def test_codes_fill_the_range():
    """Asymmetric: the group's extremes map to the codes 0 and 2^b − 1 (no wasted code)."""
    w = random_tensor((16, 128))
    w[:, 0], w[:, 1] = -5.0, 7.0
    q = unpack(quantize(w, 4, 128).data, 4)
    assert (q.amin(dim=1) == 0).all() and (q.amax(dim=1) == 15).all()


def test_zero_is_exact_and_zero_groups_survive():
    w = random_tensor((8, 64))
    w[0] = 0.0
    w[1, :5] = 0.0
    ŵ = dequantize(quantize(w, 4, 32))
    assert (ŵ[0] == 0).all() and (ŵ[1, :5] == 0).all()  # the zero point is an integer code: 0 is on the grid


@pytest.mark.parametrize("bits", [4, 8])
def test_dot_product_error_bound_and_sqrt_k_growth(bits):
    """|Σ x(ŵ − w)| ≤ (s/2)·Σ|x| always; its RMS over many outputs matches s·‖x‖/√12."""
    N, K = 2048, 1024
    w = random_tensor((N, K), torch.float64)
    packed = quantize(w.float(), bits, 128)
    x = random_tensor((4, K), torch.float64)
    err = x @ dequantize(packed).double().T - x @ w.T
    assert (err.abs() <= quantization_error_bound(x, packed)).all()
    predicted = quantization_error_rms(x, packed)
    ratio = err.pow(2).mean(dim=1).sqrt() / predicted.pow(2).mean(dim=1).sqrt()
    assert ((ratio > 0.9) & (ratio < 1.1)).all(), ratio  # 2048 outputs: the RMS is within a few % of theory


def test_error_grows_as_sqrt_k():
    """Quadrupling K doubles the RMS error of the dot product (x of random signs: ‖x‖² = K exactly)."""
    rms = []
    for K in (256, 1024, 4096):
        w = random_tensor((2048, K), torch.float64)
        packed = quantize(w.float(), 4, 128)
        # 8 sign vectors × 2048 outputs (nearly uncorrelated): each RMS is known to ≈ 1/√(2·16384) ≈ 0.55%, a ratio
        # to ≈ 0.9%, so rel=0.1 is 11σ away (one vector, 2048 samples: σ ≈ 2.1%, 4.7σ, a failure per ~2·10⁵ runs)
        x = torch.sign(random_tensor((8, K), torch.float64))
        rms.append((x @ dequantize(packed).double().T - x @ w.T).pow(2).mean().sqrt().item())
    assert rms[1] / rms[0] == pytest.approx(2.0, rel=0.1)
    assert rms[2] / rms[1] == pytest.approx(2.0, rel=0.1)


def test_the_seeds_int4_example():
    """Range [−3, 3] in 15 steps: s = 0.4, worst error 0.2, mean |error| 0.1 (uniform on ±s/2)."""
    w = torch.linspace(-3, 3, 128 * 64).reshape(64, 128)[torch.randperm(64)]
    w[:, 0], w[:, 1] = -3.0, 3.0
    packed = quantize(w, 4, 128)
    assert packed.scales.float().max().item() == pytest.approx(0.4, rel=1e-6)
    err = (dequantize(packed) - w).abs()
    assert err.max().item() <= 0.2 + 1e-6
    assert err.mean().item() == pytest.approx(0.1, rel=0.1)


def test_dequantisation_modes_agree_exactly():
    """Shift (q − z), scale (q·s, for z = 0), scale-and-shift ((q − z)·s) and FMA (q·s + b, b = −z·s) in fp32."""
    packed = quantize(random_tensor((32, 128), torch.float16), 4, 32)
    q = unpack(packed.data, 4).float().reshape(32, 4, 32)
    s, z = packed.scales.T.float()[..., None], packed.zeros.T.float()[..., None]
    shift = q - z
    scale_and_shift = (q - z) * s
    fma = torch.addcmul(-z * s, q, s)  # one rounding of q·s + b: exact, since (q − z)·s fits in fp32
    assert torch.equal(scale_and_shift, shift * s)
    assert torch.equal(fma, scale_and_shift)
    assert torch.equal(dequantize(packed), scale_and_shift.reshape(32, 128))
    sym = quantize(random_tensor((8, 64)), 8, 32, symmetric=True)
    q8 = unpack(sym.data, 8).float().reshape(8, 2, 32) - 128  # signed codes: the scale-only mode
    assert torch.equal(q8 * sym.scales.T.float()[..., None], dequantize(sym).reshape(8, 2, 32))


def test_magic_number_unpacking():
    """OR-ing a code q < 2²³ into the mantissa of 2²³ gives the float 2²³ + q: no conversion instruction."""
    q = torch.arange(256, dtype=torch.int32)
    v = (q | 0x4B000000).view(torch.float32)
    assert torch.equal(v - 2.0**23, q.float())


@pytest.mark.parametrize("bits", [4, 8])
def test_shift_free_unpacking_is_exact(bits):
    """The GEMV's unpacking: the masked code, still at its bit position, read as a float is the subnormal
    q·2^(shift − 149); one multiply-add by 2^(100 − shift) and −z·2⁻⁴⁹ gives (q − z)·2⁻⁴⁹ exactly, for every
    code, zero point and slot of a 16-bit half (the other half is shifted down by 16 first)."""
    q = torch.arange(2**bits, dtype=torch.int32)[:, None]
    z = torch.arange(2**bits, dtype=torch.float32)[None, :]
    for shift in range(0, 16, bits):
        tiny = (q << shift).view(torch.float32)
        assert (tiny < 2.0**-126).all()  # subnormal: only mantissa bits are set
        w = tiny * 2.0 ** (100 - shift) - z * 2.0**-49  # each step exact, so fused or not gives the same
        assert torch.equal(w.double() * 2.0**49, (q - z).double())


def test_bytes_and_speedup_bound():
    M, N, K = 1, 8192, 8192
    assert decode_bytes(M, N, K, 4, 128) == N * K // 2 + 2 * N * (K // 128) * 2 + (M * K + M * N) * 2
    assert speedup_bound(M, N, K, 4, 128) == pytest.approx(2 * N * K / (N * K / 2 + 4 * N * K / 128), rel=1e-3)
    assert 3.7 < speedup_bound(M, N, K, 4, 128) < 3.8  # codes at 0.5 byte, scales + zeros add 1/32 byte each
    assert 1.9 < speedup_bound(M, N, K, 8, 128) < 2.0
    assert speedup_bound(4096, N, K, 4, 128) < 3  # large M: x and the output are a real share of the bytes
    assert math.isclose(speedup_bound(M, N, K, 4, K), 2 * N * K / (N * K / 2 + 4 * N), rel_tol=1e-3)
