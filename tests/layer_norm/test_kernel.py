"""layer_norm: forward and backward (dx, dW, dB) against float64 PyTorch on fresh random inputs."""

from academy import DEVICE, INTERPRETED
from academy.testing import (
    FLOAT_DTYPES,
    assert_close,
    assert_empty_gradients,
    assert_no_second_derivative,
    random_tensor,
)

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from examples.layer_norm import kernel
from examples.layer_norm.kernel import layer_norm, reference
from examples.norms import launch as norm_launch
from examples.norms.launch import tile_config
from tests.norm_fixtures import norm_fixtures

SHAPES = [(1, 1), (3, 7), (5, 127), (33, 1000), (2, 3, 1025), (4, 3001)]


_poison_outputs, path, _set_limits = norm_fixtures(kernel)


def _torch_grads(x, w, b, dy, dtype, eps=1e-5):
    """Output and gradients of PyTorch's layer norm computed in ``dtype``."""
    leaves = [t.detach().to(dtype).requires_grad_() if t is not None else None for t in (x, w, b)]
    y = F.layer_norm(leaves[0], (x.shape[-1],), leaves[1], leaves[2], eps)
    y.backward(dy.to(dtype))
    return [y.detach()] + [t.grad if t is not None else None for t in leaves]


def _inputs(shape, dtype, bias=True):
    n = shape[-1]
    x = random_tensor(shape, dtype, scale=0.5, offset=-2.3, requires_grad=True)
    w = random_tensor((n,), dtype, scale=0.5, offset=1.0, requires_grad=True)
    b = random_tensor((n,), dtype, scale=0.5, requires_grad=True) if bias else None
    dy = random_tensor(shape, dtype)
    return x, w, b, dy


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward(shape, dtype, path):
    if dtype == torch.bfloat16 and INTERPRETED:
        pytest.skip("end to end in bf16 needs round-to-nearest; the interpreter truncates (see contributing)")
    x, w, b, dy = _inputs(shape, dtype)
    y = layer_norm(x, w, b)
    y.backward(dy)
    assert y.dtype == dtype and x.grad.dtype == dtype and w.grad.dtype == dtype
    expected = _torch_grads(x, w, b, dy, torch.float64)
    if shape[-1] == 1:  # x̂ = 0 exactly: y = β, dW = 0 (float64 PyTorch leaves ~1e-14 of noise)
        assert torch.equal(y, b.detach().expand_as(y)) and not w.grad.any()
        # dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)) is 0 in exact arithmetic; compiled, the
        # multiply-add contraction of ĝ − mean(ĝ) leaves one rounding of ĝ, times rstd = 1/√ε.
        rounding = torch.finfo(dtype).eps * (dy * w).detach().abs().max().float() / 1e-5**0.5
        assert x.grad.float().abs().max() <= 4 * rounding
        return
    same_precision = _torch_grads(x, w, b, dy, dtype) if dtype != torch.float32 else [None] * 4
    for name, got, exp, base in zip(("y", "dx", "dW", "dB"), (y, x.grad, w.grad, b.grad), expected, same_precision):
        assert_close(got, exp, dtype=dtype, baseline=base, name=name)


def test_many_rows_per_program_accumulate_dw(path, monkeypatch):
    """More tiles than programs: each program sums dW/dB over several tiles."""
    monkeypatch.setattr(norm_launch, "MIN_ELEMENTS_PER_TILE", 128)
    x, w, b, dy = _inputs((67, 100), torch.float32)
    layer_norm(x, w, b).backward(dy)
    _, dx, dw, db = _torch_grads(x, w, b, dy, torch.float64)
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")
    assert_close(b.grad, db, dtype=torch.float32, name="dB")


@pytest.mark.parametrize("mode", ["columns", "rows"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(5, 127), (33, 1000), (3, 3001)], ids=str)
def test_both_wide_backward_designs(mode, dtype, shape, monkeypatch):
    """Wide rows: the column-split backward (default) and the per-row one with partial rows in memory."""
    _set_limits(
        monkeypatch,
        MAX_FUSED_COLS=64,
        WIDE_BLOCK_N=128,
        WIDE_NUM_WARPS=1,
        COLUMNS_BLOCK_N=128,
        COLUMNS_NUM_WARPS=1,
        WIDE_BACKWARD=mode,
    )
    x, w, b, dy = _inputs(shape, dtype)
    layer_norm(x, w, b).backward(dy)
    expected = _torch_grads(x, w, b, dy, torch.float64)
    same_precision = _torch_grads(x, w, b, dy, dtype) if dtype != torch.float32 else [None] * 4
    for name, got, exp, base in zip(("dx", "dW", "dB"), (x.grad, w.grad, b.grad), expected[1:], same_precision[1:]):
        assert_close(got, exp, dtype=dtype, baseline=base, name=name)


@pytest.mark.parametrize("reduce", ["triton", "torch"])
@pytest.mark.parametrize("programs_per_sm", [1, 4])
def test_reduction_methods_and_grids(reduce, programs_per_sm, monkeypatch):
    """The in-register backward on grids where each program takes one tile or several."""
    tile = tile_config(300)["BLOCK_M"] * tile_config(300)["BLOCK_N"]
    _set_limits(monkeypatch, REDUCE=reduce, BWD_TILE_ELEMENTS_PER_SM=programs_per_sm * tile)
    x, w, b, dy = _inputs((57, 300), torch.float32)
    layer_norm(x, w, b).backward(dy)
    _, dx, dw, db = _torch_grads(x, w, b, dy, torch.float64)
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")
    assert_close(b.grad, db, dtype=torch.float32, name="dB")


def test_without_bias(path):
    x, w, _, dy = _inputs((6, 200), torch.float32, bias=False)
    y = layer_norm(x, w, None)
    y.backward(dy)
    y64, dx, dw, _ = _torch_grads(x, w, None, dy, torch.float64)
    assert_close(y, y64, dtype=torch.float32, name="y")
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")


def test_only_weight_requires_grad_and_dy_is_not_overwritten():
    x, w, b, dy = _inputs((5, 300), torch.float32)
    x = x.detach()
    dy_before = dy.clone()
    layer_norm(x, w, b).backward(dy)
    assert x.grad is None and w.grad is not None and b.grad is not None
    assert torch.equal(dy, dy_before)


def test_large_mean_small_spread(path):
    """Rows at 1000 ± 0.01: E[x²] − E[x]² in fp32 would cancel to noise (ulp(10⁶) ≈ 0.06 ≫ σ² = 10⁻⁴);
    both kernels stay as close to float64 as PyTorch's own fp32 layer norm."""
    x = random_tensor((4, 500), scale=0.01, offset=1000.0)
    w, b = torch.ones(500, device=DEVICE), torch.zeros(500, device=DEVICE)
    expected = F.layer_norm(x.double(), (500,), w.double(), b.double(), 1e-5)
    many = random_tensor((256, 500), scale=0.01, offset=1000.0)
    naive_var = (many * many).mean(-1) - many.mean(-1) ** 2
    assert (naive_var - many.double().var(-1, unbiased=False)).abs().max() > 1e-3  # the trap is real (σ² = 1e-4)
    baseline = F.layer_norm(x, (500,), w, b, 1e-5)
    assert_close(layer_norm(x, w, b), expected, tol=2e-2, baseline=baseline)


def test_outlier_in_column_0_of_a_wide_row():
    """Rows wider than the in-register forward, at full size, whose first value is an outlier. The
    chunked forward once took the variance as E[(x − x₀)²] − E[x − x₀]², shifted by that first value:
    both terms are then about x₀², and fp32 lost their difference (up to ~1e-3 relative on some rows).
    It now merges each chunk's (count, mean, centred sum of squares), where nothing cancels."""
    n = norm_launch.FWD_MAX_FUSED_COLS + 3616
    x = random_tensor((4, n))
    x[:, 0] = random_tensor(4, scale=1e3).sign() * 3e4
    w, b = random_tensor(n, offset=1.0), random_tensor(n)
    y = layer_norm(x, w, b)
    expected = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    for row in range(4):  # row by row: one row's error could hide in another's norm
        assert_close(y[row], expected[row], dtype=torch.float32, name=f"row {row}")


def test_constant_rows_give_bias(path):
    """σ = 0: rstd = 1/√eps, x̂ = 0, y = β; nothing divides by zero."""
    x = torch.full((3, 100), 2.5, device=DEVICE)
    w, b = random_tensor(100), random_tensor(100)
    assert_close(layer_norm(x, w, b), b.expand(3, 100), dtype=torch.float32)


def test_row_strided_and_batched_input(path):
    base = random_tensor((2, 20, 300))
    x = base[:, ::2, 10:260]  # row strides 600 and 6000, unit column stride
    w, b = random_tensor(250), random_tensor(250)
    assert_close(layer_norm(x, w, b), F.layer_norm(x.double(), (250,), w.double(), b.double()), dtype=torch.float32)


def test_column_strided_input_is_copied_not_misread():
    x = random_tensor((64, 30)).t()
    w, b = random_tensor(64), random_tensor(64)
    assert_close(layer_norm(x, w, b), F.layer_norm(x.double(), (64,), w.double(), b.double()), dtype=torch.float32)


def test_wide_rows_take_the_chunked_path_at_full_size():
    n = max(kernel.MAX_FUSED_COLS, norm_launch.FWD_MAX_FUSED_COLS) + 3001
    x, w, b, dy = _inputs((2, n), torch.float32)
    layer_norm(x, w, b).backward(dy)
    _, dx, dw, db = _torch_grads(x, w, b, dy, torch.float64)
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")


def test_reference_is_torch():
    x, w, b = (
        random_tensor((5, 77), torch.bfloat16),
        random_tensor(77, torch.bfloat16),
        random_tensor(77, torch.bfloat16),
    )
    expected = F.layer_norm(x.float(), (77,), w.float(), b.float(), 1e-5).bfloat16()
    assert torch.equal(reference(x, w, b), expected)


def test_empty_batch_is_differentiable():
    x = torch.empty((0, 10), device=DEVICE, requires_grad=True)
    w = random_tensor(10, requires_grad=True)
    y = layer_norm(x, w, random_tensor(10))
    assert y.shape == (0, 10)
    y.sum().backward()
    assert torch.equal(w.grad, torch.zeros(10, device=DEVICE))


@pytest.mark.parametrize("n_cols", [1, 100, 1024, 4096, 16384])
def test_tile_config_fits_the_row(n_cols):
    config = tile_config(n_cols)
    assert config["BLOCK_N"] >= n_cols and config["BLOCK_N"] & (config["BLOCK_N"] - 1) == 0
    assert config["BLOCK_M"] * config["BLOCK_N"] >= norm_launch.MIN_ELEMENTS_PER_TILE
    assert config["num_warps"] in (1, 2, 4, 8, 16, 32)


def _ok():
    return random_tensor((3, 8)), random_tensor(8), random_tensor(8)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: (random_tensor((3, 8), torch.float64), *_ok()[1:]), TypeError, "x has dtype"),
        (lambda: ([[1.0]], *_ok()[1:]), TypeError, "torch.Tensor"),
        (lambda: (torch.tensor(1.0, device=DEVICE), *_ok()[1:]), ValueError, "non-empty last dimension"),
        (lambda: (torch.empty((3, 0), device=DEVICE), *_ok()[1:]), ValueError, "non-empty last dimension"),
        (lambda: (_ok()[0], random_tensor(7), _ok()[2]), ValueError, r"weight has shape \(7,\)"),
        (lambda: (_ok()[0], random_tensor((1, 8)), _ok()[2]), ValueError, "weight has shape"),
        (lambda: (*_ok()[:2], random_tensor(9)), ValueError, "bias has shape"),
        (lambda: (*_ok()[:2], torch.ones(8, dtype=torch.int32, device=DEVICE)), TypeError, "bias has dtype"),
    ],
)
def test_bad_input_raises_clear_error(make, error, message):
    with pytest.raises(error, match=message):
        layer_norm(*make())


@pytest.mark.parametrize(
    "eps, error", [(-1.0, ValueError), (float("nan"), ValueError), ("1e-5", TypeError), (True, TypeError)]
)
def test_bad_eps_raises(eps, error):
    with pytest.raises(error, match="eps must be a"):
        layer_norm(*_ok(), eps=eps)


def test_numpy_eps_is_accepted():
    x, w, b = _ok()
    expected = F.layer_norm(x.double(), (8,), w.double(), b.double(), 1e-3)
    assert_close(layer_norm(x, w, b, np.float32(1e-3)), expected, dtype=torch.float32)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
def test_weight_none_is_no_scale(bias, path):
    """As F.layer_norm(x, (N,), None, bias): no scale; x and the bias still get their gradients."""
    x, _, b, dy = _inputs((5, 300), torch.float32, bias=bias)
    y = layer_norm(x, None, b)
    y.backward(dy)
    y64, dx, _, db = _torch_grads(x, None, b, dy, torch.float64)
    assert_close(y, y64, dtype=torch.float32, name="y")
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    if bias:
        assert_close(b.grad, db, dtype=torch.float32, name="dB")
    with torch.no_grad():
        assert_close(layer_norm(x, None, b), y64, dtype=torch.float32, name="y (no grad)")


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no affine"])
def test_empty_batch_gets_zero_gradients(affine):
    x = random_tensor((2, 0, 10), requires_grad=True)
    w, b = (random_tensor(10, requires_grad=True), random_tensor(10, requires_grad=True)) if affine else (None, None)
    assert_empty_gradients(layer_norm, x, w, b)


def test_double_backward_raises():
    x, w, b, _ = _inputs((3, 40), torch.float32)
    assert_no_second_derivative(layer_norm, x, w, b)


@pytest.mark.skipif(DEVICE != "cuda", reason="a CPU tensor is the right device under the interpreter")
def test_wrong_device_raises():
    with pytest.raises(ValueError, match="kernels run on"):
        layer_norm(torch.ones(4, 4), torch.ones(4), torch.ones(4))


@pytest.mark.skipif(DEVICE != "cuda", reason="2**31 + elements: GPU only")
def test_row_offsets_beyond_int32():
    n_cols = 4096
    n_rows = 2**31 // n_cols + 3  # the last rows start past 2**31 elements
    x = torch.randn(n_rows, n_cols, device=DEVICE, dtype=torch.bfloat16)
    w, b = (
        torch.randn(n_cols, device=DEVICE, dtype=torch.bfloat16),
        torch.randn(n_cols, device=DEVICE, dtype=torch.bfloat16),
    )
    y = layer_norm(x, w, b)
    tail = slice(n_rows - 3, n_rows)
    assert_close(y[tail], reference(x[tail], w, b), dtype=torch.bfloat16)


def test_too_many_rows_is_a_clear_error():
    x = torch.zeros((1, 1), device=DEVICE).expand(2**31, 1)  # 2**31 rows, no memory
    with pytest.raises(ValueError, match="rows; at most"):
        layer_norm(x, torch.ones(1, device=DEVICE), None)


@pytest.mark.parametrize("fwd_limit, bwd_limit", [(64, 4096), (4096, 64)])
def test_forward_and_backward_paths_are_chosen_separately(fwd_limit, bwd_limit, monkeypatch):
    """The chunked forward with the in-register backward, and the other way round."""
    _set_limits(
        monkeypatch,
        FWD_MAX_FUSED_COLS=fwd_limit,
        MAX_FUSED_COLS=bwd_limit,
        WIDE_BLOCK_N=128,
        WIDE_NUM_WARPS=1,
        COLUMNS_BLOCK_N=128,
        COLUMNS_NUM_WARPS=1,
    )
    x, w, b, dy = _inputs((7, 300), torch.float32)
    y = layer_norm(x, w, b)
    y.backward(dy)
    ref_y, dx, dw, db = _torch_grads(x, w, b, dy, torch.float64)
    for name, got, exp in (("y", y, ref_y), ("dx", x.grad, dx), ("dW", w.grad, dw), ("dB", b.grad, db)):
        assert_close(got, exp, dtype=torch.float32, name=name)


@pytest.mark.parametrize("n_cols", [1, 100, 512, 4096, 8192, 16384])
def test_forward_launch_is_one_tile_per_program_within_the_warp_cap(n_cols):
    """What the page says of the forward: every row it can hold takes one tile per program,
    with at most the chapter's FWD_MAX_WARPS; wider rows the chunked kernel."""
    n_rows = 1000
    in_registers, grid, config = norm_launch.forward_launch(n_rows, n_cols, kernel.FWD_MAX_WARPS)
    assert in_registers
    assert grid == -(-n_rows // config["BLOCK_M"])
    assert config["BLOCK_N"] >= n_cols and config["num_warps"] <= kernel.FWD_MAX_WARPS
    in_registers, grid, config = norm_launch.forward_launch(n_rows, norm_launch.FWD_MAX_FUSED_COLS + 1, 8)
    assert not in_registers and grid <= n_rows and config["BLOCK_N"] == norm_launch.WIDE_BLOCK_N


def test_backward_launch_switches_to_the_column_split_above_max_fused_cols():
    design, programs, config = norm_launch.backward_launch(4096, kernel.MAX_FUSED_COLS, kernel.MAX_FUSED_COLS)
    assert design == "registers" and config["BLOCK_N"] == kernel.MAX_FUSED_COLS
    assert programs <= norm_launch.sm_count() * norm_launch.BWD_PROGRAMS_PER_SM
    design, _, _ = norm_launch.backward_launch(4096, kernel.MAX_FUSED_COLS + 1, kernel.MAX_FUSED_COLS)
    assert design == norm_launch.WIDE_BACKWARD == "columns"


@pytest.mark.parametrize("n_rows, n_cols", [(1, 9000), (7, 16384), (1000, 65536), (8192, 16385)])
def test_column_split_covers_every_row_and_column_once(n_rows, n_cols):
    groups, strips, rows_per_group, config = norm_launch.column_split(n_rows, n_cols)
    assert (groups - 1) * rows_per_group < n_rows <= groups * rows_per_group  # no empty group
    assert strips * config["BLOCK_N"] >= n_cols > (strips - 1) * config["BLOCK_N"]
