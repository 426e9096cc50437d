"""The FP8 matmul against float64 on the dequantised operands, within the bound the page derives.

Every result is compared, element by element, with the float64 product of the
dequantised operands and must lie within :func:`error_bound` (the products of
fp8 codes exact, each K-block's sum in the accumulator's precision, the two
scale multiplies and the fp32 accumulation, one rounding to the output), and
within a relative L2 bar: the output dtype's, or a few roundings of the arithmetic
where that is coarser (the GPU's fp8 accumulator keeps about 14 bits, so an fp32
output cannot meet fp32's bar). Outputs are poisoned.
"""

from academy import DEVICE, INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor, tolerance

import pytest
import torch

from examples.fp8_matmul import kernel as fm
from examples.fp8_matmul.kernel import (
    A_BLOCKS,
    B_BLOCKS,
    accumulator_roundoff,
    dequantize_operand,
    error_bound,
    fp8_matmul,
    fp8_matmul_upcast,
    quantize_fp8,
    reference,
)

gpu = pytest.mark.skipif(INTERPRETED, reason="GPU sizes: the interpreter takes about half a millisecond per program")


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, fm)


def operands(M, N, K, a_layout="block", b_layout="block", dtype=torch.float8_e4m3fn, x=None, w=None):
    x = random_tensor((M, K)) if x is None else x
    w = random_tensor((N, K), scale=max(K, 1) ** -0.5) if w is None else w
    a, a_scale = quantize_fp8(x, A_BLOCKS[a_layout], dtype)
    b, b_scale = quantize_fp8(w, B_BLOCKS[b_layout], dtype)
    return a, a_scale, b, b_scale


def exact(a, a_scale, b, b_scale):
    return dequantize_operand(a, a_scale, A_BLOCKS) @ dequantize_operand(b, b_scale, B_BLOCKS).T


def worst_ratio(y, a, a_scale, b, b_scale, **bound_options) -> float:
    """max |y − exact| / bound over the elements: ≤ 1 means within the derived bound."""
    bound = error_bound(a, a_scale, b, b_scale, y.dtype, **bound_options)
    error = (y.double() - exact(a, a_scale, b, b_scale)).abs()
    ratio = torch.where(error == 0, 0.0, error / bound)  # an exact zero is within a zero bound
    return ratio.max().item() if ratio.numel() else 0.0


def upcast_bound_options(K):
    """Stage 1 rounds each dequantised operand to bf16 on the GPU (fp32 under the interpreter), and sums
    all of K in one fp32 accumulator."""
    if INTERPRETED:
        return dict(chunk=K, chunk_roundoff=2.0**-24, operand_roundoff=2.0**-24)
    return dict(chunk=K, chunk_roundoff=2.0**-23, operand_roundoff=2.0**-8 + 2.0**-23)


def l2_bar(out_dtype, chunk_roundoff=None, operand_roundoff=0.0, **_) -> float:
    """The output dtype's relative L2 bar, or four roundings of the accumulator and the operands
    where those are coarser."""
    u = accumulator_roundoff() if chunk_roundoff is None else chunk_roundoff
    return max(tolerance(out_dtype), 4 * (u + 2 * operand_roundoff))


def check(y, a, a_scale, b, b_scale, **bound_options):
    assert torch.isfinite(y).all(), "NaN or inf in the output: an element was never written"
    worst = worst_ratio(y, a, a_scale, b, b_scale, **bound_options)
    assert worst <= 1.0, f"error exceeds the derived bound by {worst:.2f}x"
    assert_close(y, exact(a, a_scale, b, b_scale), tol=l2_bar(y.dtype, **bound_options))


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("M, N, K", [(40, 72, 200), (1, 130, 256), (33, 129, 384), (17, 24, 100)])
def test_block_scales(M, N, K, out_dtype):
    """Irregular sizes: ragged row and column tiles, a K tail inside the last scale block, N past a
    128-row weight block (130, 129), K shorter than one block (100)."""
    a, a_scale, b, b_scale = operands(M, N, K)
    y = fp8_matmul(a, a_scale, b, b_scale, out_dtype)
    assert y.dtype == out_dtype and y.shape == (M, N)
    check(y, a, a_scale, b, b_scale)


@pytest.mark.parametrize(
    "a_layout, b_layout", [("row", "row"), ("tensor", "tensor"), ("block", "row"), ("tensor", "block")]
)
def test_row_tensor_and_mixed_layouts(a_layout, b_layout):
    a, a_scale, b, b_scale = operands(24, 40, 300, a_layout, b_layout)
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale)


def test_zero_dimensional_tensor_scales():
    a, a_scale, b, b_scale = operands(9, 20, 64, "tensor", "tensor")
    a_scale, b_scale = a_scale.reshape(()), b_scale.reshape(())
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale)


@pytest.mark.parametrize("fp8", [torch.float8_e5m2, (torch.float8_e4m3fn, torch.float8_e5m2)], ids=["e5m2", "mixed"])
def test_e5m2_and_mixed_formats(fp8):
    a_dtype, b_dtype = fp8 if isinstance(fp8, tuple) else (fp8, fp8)
    a, a_scale = quantize_fp8(random_tensor((20, 160)), A_BLOCKS["block"], a_dtype)
    b, b_scale = quantize_fp8(random_tensor((36, 160)), B_BLOCKS["block"], b_dtype)
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale)


@pytest.mark.parametrize("config", [{"BLOCK_K": 128}, {"BLOCK_K": 64, "GROUP_M": 1}, {"BLOCK_M": 32, "GROUP_M": 3}])
def test_k_steps_and_program_orders(config):
    """A K step of the whole scale block, of half of it, and grouped orders that leave a short last band."""
    a, a_scale, b, b_scale = operands(70, 96, 384)
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32, config=config), a, a_scale, b, b_scale)


@pytest.mark.parametrize(
    "b_layout, block_n, folded",
    [("block", 32, True), ("block", 256, False), ("tensor", 64, True), ("row", 32, False)],
)
def test_folded_and_unfolded_b_scales(b_layout, block_n, folded, monkeypatch):
    """A tile inside one weight block (or under one tensor scale) folds b's scale into the rows'; a
    256-wide tile spans two weight blocks and a row layout has a scale per column: both stay unfolded.
    Weight blocks of very different magnitude make a wrongly shared scale leave the bound."""
    launched = {}
    monkeypatch.setattr(fm, "fp8_matmul_kernel", _Recording(fm.fp8_matmul_kernel, launched))
    x = random_tensor((300, 256))
    x[128:] *= 1000.0  # the second weight block's scale is about 1000 times the first's
    a, a_scale = quantize_fp8(random_tensor((20, 256)), A_BLOCKS["block"])
    b, b_scale = quantize_fp8(x, B_BLOCKS[b_layout])
    y = fp8_matmul(a, a_scale, b, b_scale, torch.float32, config={"BLOCK_N": block_n})
    assert launched["ONE_B_SCALE"] is folded
    check(y, a, a_scale, b, b_scale)


class _Recording:
    """A kernel whose launches record their compile-time options."""

    def __init__(self, kernel, launched: dict):
        self.kernel, self.launched = kernel, launched

    def __getitem__(self, grid):
        def launch(*args, **meta):
            self.launched.update(meta)
            return self.kernel[grid](*args, **meta)

        return launch


def test_non_contiguous_operands_and_scales():
    a, a_scale, b, b_scale = operands(24, 48, 256)
    a_t = a.T.contiguous().T  # column-major codes
    a_scale_t = a_scale.T.contiguous().T
    b_scale_t = b_scale.T.contiguous().T
    check(fp8_matmul(a_t, a_scale_t, b, b_scale_t, torch.float32), a, a_scale, b, b_scale)


def test_out_argument_is_filled():
    a, a_scale, b, b_scale = operands(10, 20, 128)
    out = torch.full((10, 20), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    assert fp8_matmul(a, a_scale, b, b_scale, out=out) is out
    check(out, a, a_scale, b, b_scale)


@pytest.mark.parametrize("M, N, K", [(40, 72, 200), (5, 130, 256)])
def test_upcast_stage(M, N, K):
    a, a_scale, b, b_scale = operands(M, N, K)
    check(fp8_matmul_upcast(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale, **upcast_bound_options(K))


# ---------------------------------------------------------------------------------------------- extremes


def test_zero_blocks_contribute_exact_zeros():
    """An all-zero block of a and a 128 × 128 zero block of b: scale 1, codes 0, finite results."""
    x, w = random_tensor((16, 256)), random_tensor((160, 256))
    x[3, 128:] = 0
    w[:128, :128] = 0
    a, a_scale, b, b_scale = operands(16, 160, 256, x=x, w=w)
    assert a_scale[3, 1] == 1 and b_scale[0, 0] == 1
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale)
    zero = fp8_matmul(*operands(4, 8, 128, x=torch.zeros(4, 128, device=DEVICE)), torch.float32)
    assert not zero.count_nonzero()


def test_huge_and_tiny_magnitudes():
    """Values near 1e17 times values near 1e17 (the output near bf16's largest finite values), and an
    activation of 1e-15 entries: the scales carry the range, the codes stay within e4m3."""
    a, a_scale, b, b_scale = operands(
        8, 24, 256, x=random_tensor((8, 256), scale=1e17), w=random_tensor((24, 256), scale=1e17 / 16)
    )
    y = fp8_matmul(a, a_scale, b, b_scale, torch.float32)
    check(y, a, a_scale, b, b_scale)
    assert y.abs().max() > 1e34
    a, a_scale, b, b_scale = operands(8, 24, 256, x=random_tensor((8, 256), scale=1e-15))
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale)


def test_an_outlier_costs_only_its_own_block():
    """One activation of 1e4 among N(0, 1) values: with block scales only its 1 × 128 block loses
    precision, and the product is still within the bound on the dequantised operands."""
    x = random_tensor((12, 384))
    x[5, 200] = 1e4
    a, a_scale, b, b_scale = operands(12, 40, 384, x=x)
    assert a_scale[5, 1].item() == pytest.approx(1e4 / 448, rel=1e-6)
    others = torch.ones_like(a_scale, dtype=torch.bool)
    others[5, 1] = False
    assert a_scale[others].max() < 10 / 448  # every other block keeps its own, small scale
    check(fp8_matmul(a, a_scale, b, b_scale, torch.float32), a, a_scale, b, b_scale)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_a_non_finite_input_spoils_only_its_rows_blocks():
    x = random_tensor((6, 256))
    x[2, 10] = float("inf")
    a, a_scale, b, b_scale = operands(6, 16, 256, x=x)
    y = fp8_matmul(a, a_scale, b, b_scale, torch.float32)
    assert torch.isnan(y[2]).all()
    rest = torch.cat([y[:2], y[3:]])
    assert torch.isfinite(rest).all()


@pytest.mark.parametrize("M, N, K", [(0, 5, 128), (5, 0, 128), (0, 0, 0)])
def test_empty_outputs(M, N, K):
    a, a_scale, b, b_scale = operands(M, N, K)
    for op in (fp8_matmul, fp8_matmul_upcast):
        assert op(a, a_scale, b, b_scale).shape == (M, N)


def test_empty_k_is_an_empty_sum():
    a, a_scale, b, b_scale = operands(3, 5, 0)
    for op in (fp8_matmul, fp8_matmul_upcast):
        y = op(a, a_scale, b, b_scale, torch.float32)
        assert y.shape == (3, 5) and not y.count_nonzero()


# --------------------------------------------------------------------------------- the bound can fail


@pytest.mark.parametrize("fault", ["neighbour_scale", "scale_times_2", "b_scales_transposed"])
def test_the_bound_catches_wrong_scales(fault):
    """A kernel that read a neighbouring block's scale, a scale 2× off, or b's scale of block (k, n)
    for block (n, k) would leave results outside the bound: the test can fail. The blocks differ in
    magnitude (a's K blocks by 4^k, b's blocks by 2^(n − 2k)), so every fault moves a large share of
    the sum; with look-alike blocks a fault could hide inside the GPU's looser bound."""
    block = torch.arange(3, device=DEVICE)
    a_magnitude = torch.exp2(2.0 * block).repeat_interleave(128)
    b_magnitude = torch.exp2(block[:, None] - 2.0 * block[None, :]).repeat_interleave(128, 0).repeat_interleave(128, 1)
    x, w = random_tensor((16, 384)) * a_magnitude, random_tensor((384, 384)) * b_magnitude
    a, a_scale, b, b_scale = operands(16, 384, 384, x=x, w=w)
    wrong_a, wrong_b = a_scale.clone(), b_scale.clone()
    if fault == "neighbour_scale":
        wrong_a[:, 2] = a_scale[:, 1]
    elif fault == "scale_times_2":
        wrong_a[4, 2] *= 2
    else:
        wrong_b = b_scale.T.contiguous()
    y = exact(a, wrong_a, b, wrong_b).float()
    assert worst_ratio(y, a, a_scale, b, b_scale) > 1


def test_reference_is_the_dequantised_product():
    a, a_scale, b, b_scale = operands(9, 11, 200)
    manual = (a.double() * a_scale.repeat_interleave(128, dim=1)[:, :200]) @ (
        b.double() * b_scale.repeat_interleave(128, dim=0)[:11].repeat_interleave(128, dim=1)[:, :200]
    ).T
    torch.testing.assert_close(reference(a, a_scale, b, b_scale, torch.float64), manual, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------- bad inputs


def test_rejects_bad_inputs():
    a, a_scale, b, b_scale = operands(8, 16, 256)
    with pytest.raises(TypeError, match="a has dtype"):
        fp8_matmul(a.float(), a_scale, b, b_scale)
    with pytest.raises(TypeError, match="a_scale has dtype"):
        fp8_matmul(a, a_scale.half(), b, b_scale)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        fp8_matmul(a, 0.5, b, b_scale)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        fp8_matmul(a, a_scale, b[:, :128], b_scale[:, :1])
    with pytest.raises(ValueError, match="must be \\(M, K\\)"):
        fp8_matmul(a[None], a_scale, b, b_scale)
    with pytest.raises(TypeError, match="out_dtype"):
        fp8_matmul(a, a_scale, b, b_scale, torch.int32)
    with pytest.raises(ValueError, match="a_scale has shape \\(8, 3\\), which fits no scale layout"):
        fp8_matmul(a, torch.ones(8, 3, device=DEVICE), b, b_scale)
    with pytest.raises(ValueError, match="b_scale has shape \\(16, 2\\)"):
        fp8_matmul(a, a_scale, b, torch.ones(16, 2, device=DEVICE))
    with pytest.raises(ValueError, match="BLOCK_K must divide 128"):
        fp8_matmul(a, a_scale, b, b_scale, config={"BLOCK_K": 256})
    with pytest.raises(ValueError, match="unknown keys"):
        fp8_matmul(a, a_scale, b, b_scale, config={"BLOCK": 64})
    with pytest.raises(ValueError, match="forward only"):
        fp8_matmul(a, a_scale.requires_grad_(), b, b_scale)


def test_rejects_bad_outputs():
    a, a_scale, b, b_scale = operands(8, 16, 128)
    with pytest.raises(ValueError, match="out must be \\(8, 16\\)"):
        fp8_matmul(a, a_scale, b, b_scale, out=torch.empty(8, 15, dtype=torch.bfloat16, device=DEVICE))
    with pytest.raises(ValueError, match="share memory"):
        fp8_matmul(a, a_scale, b, b_scale, out=torch.empty(1, 16, dtype=torch.bfloat16, device=DEVICE).expand(8, 16))
    scales = torch.empty(8, 16, dtype=torch.float32, device=DEVICE)
    with pytest.raises(ValueError, match="overlaps a_scale"):
        fp8_matmul(a, scales[:, :1], b, b_scale, torch.float32, out=scales)


@pytest.mark.skipif(DEVICE != "cuda", reason="a CPU tensor is the wrong device only when kernels run on the GPU")
def test_rejects_cpu_operands():
    a, a_scale, b, b_scale = operands(8, 16, 128)
    with pytest.raises(ValueError, match="kernels run on"):
        fp8_matmul(a.cpu(), a_scale, b, b_scale)


def test_quantize_rejects_bad_arguments():
    x = random_tensor((4, 8))
    with pytest.raises(ValueError, match="matrix"):
        quantize_fp8(x[0])
    with pytest.raises(TypeError, match="dtype must be one of"):
        quantize_fp8(x, dtype=torch.int8)
    with pytest.raises(ValueError, match="positive ints or None"):
        quantize_fp8(x, block=(0, 128))
    with pytest.raises(TypeError, match="pair"):
        quantize_fp8(x, block=128)
    with pytest.raises(TypeError, match="x has dtype"):
        quantize_fp8(x.to(torch.float8_e4m3fn))


# ---------------------------------------------------------------------------------------------- GPU only


@gpu
@pytest.mark.parametrize("a_layout, b_layout", [("block", "block"), ("row", "row"), ("tensor", "tensor")])
def test_gpu_sizes(a_layout, b_layout):
    """Several tiles in each direction and K = 4096, 32 scale blocks: the fp8 tensor cores' own
    accumulator holds one block at a time, and the bound allows 2⁻¹² per addition there."""
    a, a_scale, b, b_scale = operands(1000, 1100, 4096, a_layout, b_layout)
    check(fp8_matmul(a, a_scale, b, b_scale), a, a_scale, b, b_scale)


@gpu
def test_gpu_upcast_stage_in_bf16():
    a, a_scale, b, b_scale = operands(300, 520, 1024)
    check(fp8_matmul_upcast(a, a_scale, b, b_scale), a, a_scale, b, b_scale, **upcast_bound_options(1024))
