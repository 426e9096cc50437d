"""rms_norm: forward and backward (dx, dW) against float64 PyTorch on fresh random inputs."""

from academy import DEVICE, INTERPRETED
from academy.testing import (
    FLOAT_DTYPES,
    assert_close,
    assert_empty_gradients,
    assert_no_second_derivative,
    half_smallest_subnormal,
    random_tensor,
    unit_roundoff,
)

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from examples.norms import launch as norm_launch
from examples.norms.launch import tile_config
from examples.rms_norm import kernel
from examples.rms_norm.kernel import reference, rms_norm
from tests.norm_fixtures import norm_fixtures

SHAPES = [(1, 1), (3, 7), (5, 127), (33, 1000), (2, 3, 1025), (4, 3001)]


_poison_outputs, path, _set_limits = norm_fixtures(kernel)


def _torch_grads(x, w, dy, dtype, eps=1e-6):
    """Output and gradients of PyTorch's RMS norm computed in ``dtype``."""
    xd, wd = (t.detach().to(dtype).requires_grad_() for t in (x, w))
    y = F.rms_norm(xd, (x.shape[-1],), wd, eps)
    y.backward(dy.to(dtype))
    return y.detach(), xd.grad, wd.grad


def _inputs(shape, dtype):
    x = random_tensor(shape, dtype, scale=2.0, offset=0.3, requires_grad=True)
    w = random_tensor((shape[-1],), dtype, scale=0.5, offset=1.0, requires_grad=True)
    return x, w, random_tensor(shape, dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward(shape, dtype, path):
    if dtype == torch.bfloat16 and INTERPRETED:
        pytest.skip("end to end in bf16 needs round-to-nearest; the interpreter truncates (see contributing)")
    x, w, dy = _inputs(shape, dtype)
    y = rms_norm(x, w)
    y.backward(dy)
    assert y.dtype == dtype and x.grad.dtype == dtype and w.grad.dtype == dtype
    expected = _torch_grads(x, w, dy, torch.float64)
    if shape[-1] == 1:  # dx = w·dy·rstd·(1 − x̂²) = eps·w·dy/(x²+eps)^(3/2): 1 − x̂² cancels, so no relative bar
        # fp32 leaves ≤ 13 roundings (2⁻²⁴ each) of |w·dy|·rstd (7 products/differences, rstd's own ≤ 3.2 twice
        # through r − x²r³), bounded by 16; then dx is rounded once to dtype (u relative, or half the smallest
        # subnormal where it underflows). (A fixed 1e-4 failed in fp16 for |x| ~ 0.01: there dx ≈ w·dy·rstd is
        # of order 1 or more, and its fp16 rounding alone exceeds 1e-4.)
        rstd = (x.detach().double() ** 2 + 1e-6).rsqrt()
        cancellation = 16 * 2.0**-24 * (w.detach().double() * dy.double()).abs() * rstd
        bound = cancellation + unit_roundoff(dtype) * expected[1].abs() + half_smallest_subnormal(dtype)
        assert ((x.grad.double() - expected[1]).abs() <= bound).all(), (x.grad, expected[1], bound)
        expected, (y, w_grad) = expected[::2], (y, w.grad)
        for name, got, exp in zip(("y", "dW"), (y, w_grad), expected):
            assert_close(got, exp, dtype=dtype, name=name)
        return
    same_precision = _torch_grads(x, w, dy, dtype) if dtype != torch.float32 else [None] * 3
    for name, got, exp, base in zip(("y", "dx", "dW"), (y, x.grad, w.grad), expected, same_precision):
        assert_close(got, exp, dtype=dtype, baseline=base, name=name)


def test_many_rows_per_program_accumulate_dw(path, monkeypatch):
    monkeypatch.setattr(norm_launch, "MIN_ELEMENTS_PER_TILE", 128)
    x, w, dy = _inputs((67, 100), torch.float32)
    rms_norm(x, w).backward(dy)
    _, dx, dw = _torch_grads(x, w, dy, torch.float64)
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")


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
    x, w, dy = _inputs(shape, dtype)
    rms_norm(x, w).backward(dy)
    expected = _torch_grads(x, w, dy, torch.float64)
    same_precision = _torch_grads(x, w, dy, dtype) if dtype != torch.float32 else [None] * 3
    for name, got, exp, base in zip(("dx", "dW"), (x.grad, w.grad), expected[1:], same_precision[1:]):
        assert_close(got, exp, dtype=dtype, baseline=base, name=name)


@pytest.mark.parametrize("reduce", ["triton", "torch"])
@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "load_after"])
@pytest.mark.parametrize("programs_per_sm", [1, 4])
def test_reduction_methods_and_grids(reduce, prefetch, programs_per_sm, monkeypatch):
    """Both loops of the in-register backward, on grids where each program takes one tile or several."""
    tile = tile_config(300)["BLOCK_M"] * tile_config(300)["BLOCK_N"]
    _set_limits(
        monkeypatch,
        REDUCE=reduce,
        BWD_TILE_ELEMENTS_PER_SM=programs_per_sm * tile,
        PREFETCH_MAX_COLS=300 if prefetch else 299,
    )
    x, w, dy = _inputs((57, 300), torch.float32)
    rms_norm(x, w).backward(dy)
    _, dx, dw = _torch_grads(x, w, dy, torch.float64)
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")


@pytest.mark.parametrize(
    "n_cols, prefetch, per_sm",
    [(768, True, 4), (2048, True, 4), (4096, True, 2), (5120, True, 1), (8192, True, 1), (16384, False, 1)],
)
def test_backward_grid_holds_8192_tile_elements_per_sm(n_cols, prefetch, per_sm):
    """The rule the page states: as many programs per SM as hold 8192 tile elements (at least
    one), each prefetching its next tile up to 8192 columns."""
    design, programs, _ = norm_launch.backward_launch(1 << 20, n_cols, kernel.MAX_FUSED_COLS)
    assert design == "registers" and (n_cols <= kernel.PREFETCH_MAX_COLS) == prefetch
    assert programs == norm_launch.sm_count() * per_sm


def test_only_weight_requires_grad_and_dy_is_not_overwritten():
    x, w, dy = _inputs((5, 300), torch.float32)
    x = x.detach()
    dy_before = dy.clone()
    rms_norm(x, w).backward(dy)
    assert x.grad is None and w.grad is not None
    assert torch.equal(dy, dy_before)


def test_zero_rows_stay_finite(path):
    """x = 0: rstd = 1/√eps, y = 0, and the gradient is finite (eps keeps it away from 1/0)."""
    x = torch.zeros((2, 100), device=DEVICE, requires_grad=True)
    w = random_tensor(100, requires_grad=True)
    y = rms_norm(x, w)
    y.backward(random_tensor((2, 100)))
    assert not y.any() and torch.isfinite(x.grad).all() and torch.isfinite(w.grad).all()


def test_scale_invariance(path):
    """rms_norm(c·x) = rms_norm(x) for c > 0 (up to eps)."""
    x, w = random_tensor((3, 400)), random_tensor(400)
    assert_close(rms_norm(1000.0 * x, w), rms_norm(x, w), dtype=torch.float32)


def test_row_strided_and_batched_input(path):
    base = random_tensor((2, 20, 300))
    x = base[:, ::2, 10:260]
    w = random_tensor(250)
    assert_close(rms_norm(x, w), F.rms_norm(x.double(), (250,), w.double(), 1e-6), dtype=torch.float32)


def test_column_strided_input_is_copied_not_misread():
    x = random_tensor((64, 30)).t()
    w = random_tensor(64)
    assert_close(rms_norm(x, w), F.rms_norm(x.double(), (64,), w.double(), 1e-6), dtype=torch.float32)


def test_wide_rows_take_the_chunked_path_at_full_size():
    x, w, dy = _inputs((2, max(kernel.MAX_FUSED_COLS, norm_launch.FWD_MAX_FUSED_COLS) + 3001), torch.float32)
    rms_norm(x, w).backward(dy)
    _, dx, dw = _torch_grads(x, w, dy, torch.float64)
    assert_close(x.grad, dx, dtype=torch.float32, name="dx")
    assert_close(w.grad, dw, dtype=torch.float32, name="dW")


def test_reference_is_torch():
    x, w = random_tensor((5, 77)), random_tensor(77)
    assert_close(reference(x, w), F.rms_norm(x.double(), (77,), w.double(), 1e-6), dtype=torch.float32)


def test_empty_batch_is_differentiable():
    x = torch.empty((0, 10), device=DEVICE, requires_grad=True)
    w = random_tensor(10, requires_grad=True)
    y = rms_norm(x, w)
    assert y.shape == (0, 10)
    y.sum().backward()
    assert torch.equal(w.grad, torch.zeros(10, device=DEVICE))


@pytest.mark.parametrize("n_cols", [1, 100, 1024, 4096, 16384])
def test_tile_config_fits_the_row(n_cols):
    config = tile_config(n_cols)
    assert config["BLOCK_N"] >= n_cols and config["BLOCK_N"] & (config["BLOCK_N"] - 1) == 0
    assert config["BLOCK_M"] * config["BLOCK_N"] >= norm_launch.MIN_ELEMENTS_PER_TILE
    assert config["num_warps"] in (1, 2, 4, 8, 16, 32)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: (random_tensor((3, 8), torch.float64), random_tensor(8)), TypeError, "x has dtype"),
        (lambda: ([[1.0]], random_tensor(8)), TypeError, "torch.Tensor"),
        (lambda: (torch.tensor(1.0, device=DEVICE), random_tensor(8)), ValueError, "non-empty last dimension"),
        (lambda: (torch.empty((3, 0), device=DEVICE), random_tensor(8)), ValueError, "non-empty last dimension"),
        (lambda: (random_tensor((3, 8)), random_tensor(7)), ValueError, r"weight has shape \(7,\)"),
        (
            lambda: (random_tensor((3, 8)), torch.ones(8, dtype=torch.int32, device=DEVICE)),
            TypeError,
            "weight has dtype",
        ),
    ],
)
def test_bad_input_raises_clear_error(make, error, message):
    with pytest.raises(error, match=message):
        rms_norm(*make())


@pytest.mark.parametrize(
    "eps, error", [(-1.0, ValueError), (float("nan"), ValueError), ("1e-6", TypeError), (True, TypeError)]
)
def test_bad_eps_raises(eps, error):
    with pytest.raises(error, match="eps must be a"):
        rms_norm(random_tensor((3, 8)), random_tensor(8), eps=eps)


def test_numpy_eps_is_accepted():
    x, w = random_tensor((3, 8)), random_tensor(8)
    expected = F.rms_norm(x.double(), (8,), w.double(), 1e-3)
    assert_close(rms_norm(x, w, np.float32(1e-3)), expected, dtype=torch.float32)


def test_weight_none_is_no_scale(path):
    """As F.rms_norm(x, (N,), None): normalised rows, no scale; x still gets its gradient."""
    x, _, dy = _inputs((5, 300), torch.float32)
    y = rms_norm(x, None)
    y.backward(dy)
    x64 = x.detach().double().requires_grad_()
    expected = F.rms_norm(x64, (300,), None, 1e-6)
    expected.backward(dy.double())
    assert_close(y, expected.detach(), dtype=torch.float32, name="y")
    assert_close(x.grad, x64.grad, dtype=torch.float32, name="dx")
    with torch.no_grad():
        assert_close(rms_norm(x, None), expected.detach(), dtype=torch.float32, name="y (no grad)")


@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no weight"])
def test_empty_batch_gets_zero_gradients(weight):
    x = random_tensor((2, 0, 10), requires_grad=True)
    w = random_tensor(10, requires_grad=True) if weight else None
    assert_empty_gradients(lambda x, w: rms_norm(x, w), x, w)


def test_double_backward_raises():
    x, w, _ = _inputs((3, 40), torch.float32)
    assert_no_second_derivative(rms_norm, x, w)


@pytest.mark.skipif(DEVICE != "cuda", reason="a CPU tensor is the right device under the interpreter")
def test_wrong_device_raises():
    with pytest.raises(ValueError, match="kernels run on"):
        rms_norm(torch.ones(4, 4), torch.ones(4))


@pytest.mark.skipif(DEVICE != "cuda", reason="2**31 + elements: GPU only")
def test_row_offsets_beyond_int32():
    n_cols = 4096
    n_rows = 2**31 // n_cols + 3
    x = torch.randn(n_rows, n_cols, device=DEVICE, dtype=torch.bfloat16)
    w = torch.randn(n_cols, device=DEVICE, dtype=torch.bfloat16)
    y = rms_norm(x, w)
    tail = slice(n_rows - 3, n_rows)
    assert_close(y[tail], reference(x[tail], w), dtype=torch.bfloat16)


def test_too_many_rows_is_a_clear_error():
    x = torch.zeros((1, 1), device=DEVICE).expand(2**31, 1)  # 2**31 rows, no memory
    with pytest.raises(ValueError, match="rows; at most"):
        rms_norm(x, torch.ones(1, device=DEVICE))


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
    x, w, dy = _inputs((7, 300), torch.float32)
    y = rms_norm(x, w)
    y.backward(dy)
    ref_y, dx, dw = _torch_grads(x, w, dy, torch.float64)
    for name, got, exp in (("y", y, ref_y), ("dx", x.grad, dx), ("dW", w.grad, dw)):
        assert_close(got, exp, dtype=torch.float32, name=name)
