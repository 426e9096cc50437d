"""rmsnorm_swiglu: output, dx and dweight against float64 PyTorch, on both kernel paths."""

from academy import DEVICE, INTERPRETED
from academy.testing import (
    FLOAT_DTYPES,
    assert_close,
    assert_empty_gradients,
    assert_no_second_derivative,
    cancellation_tolerance,
    poison_allocations,
    random_tensor,
    tolerance,
)

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from examples.fused_rmsnorm_swiglu import kernel
from examples.fused_rmsnorm_swiglu.kernel import reference, rmsnorm_swiglu, unfused_torch

SHAPES = [(1, 2), (3, 14), (5, 254), (2, 3, 2000), (4, 6002)]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


@pytest.fixture(params=["one-pass", "chunked"])
def path(request, monkeypatch):
    """Both paths: shrinking the limits sends every half wider than 32 through the chunked forward
    (chunks of 128) and the two-kernel backward (tiles of 2 rows x 128 columns, 6 rows per program)."""
    if request.param == "chunked":
        for name, value in (
            ("MAX_ONE_PASS_HALF", 32),
            ("CHUNK_N", 128),
            ("MAX_ONE_PASS_BWD_HALF", 32),
            ("DOT_CHUNK_N", 128),
            ("TILE_R", 2),
            ("TILE_C", 128),
            ("TILE_ROWS", 6),
        ):
            monkeypatch.setattr(kernel, name, value)
    return request.param


def _torch(x, weight, dout, dtype, op=unfused_torch):
    """Output and gradients of ``op`` in ``dtype``. The default is the unfused pair, which computes in the dtype it
    is given; ``reference`` computes in fp32 whatever it is given, so it cannot be the float64 ground truth."""
    x_, w_ = x.detach().to(dtype).requires_grad_(), weight.detach().to(dtype).requires_grad_()
    out = op(x_, w_, 1e-6)
    out.backward(dout.to(dtype))
    return out.detach(), x_.grad, w_.grad


def _inputs(shape, dtype):
    x = random_tensor(shape, dtype, scale=2.0, requires_grad=True)
    weight = random_tensor(shape[-1], dtype, scale=0.3, offset=1.0, requires_grad=True)
    dout = random_tensor((*shape[:-1], shape[-1] // 2), dtype)
    return x, weight, dout


def _dx_tolerance(x, weight, dout, dtype, eps=1e-6):
    """The bar for dx = r·(g − x̂·dot): the dtype's, plus the fp32 bar times (‖r·(|g| + |x̂|·|dot|)‖ / ‖dx‖ − 1).

    The kernel's fp32 roundings (a few dozen 2⁻²⁴, far below the fp32 bar of 10⁻⁵ ≈ 168·2⁻²⁴) are relative to the
    two terms it subtracts, not to their difference. The ratio is ≈ 1 on wide rows; on a row of 2 elements
    g can be nearly parallel to x̂ (about 1 seed in 100), and dx is then a small remainder of a cancellation.
    """
    x64, w64 = x.detach().double(), weight.detach().double()
    r = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    x_hat = (x64 * r).requires_grad_()
    a, b = (x_hat * w64).chunk(2, dim=-1)
    (F.silu(a) * b).backward(dout.double())
    g, x_hat = x_hat.grad, x_hat.detach()  # g = dL/dx̂
    dot = (g * x_hat).mean(-1, keepdim=True)
    return cancellation_tolerance(dtype, r * (g.abs() + x_hat.abs() * dot.abs()), r * (g - x_hat * dot))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward(shape, dtype, path):
    x, weight, dout = _inputs(shape, dtype)
    out = rmsnorm_swiglu(x, weight)
    out.backward(dout)
    assert out.shape == (*shape[:-1], shape[-1] // 2)
    assert out.dtype == x.grad.dtype == weight.grad.dtype == dtype
    expected = _torch(x, weight, dout, torch.float64)
    if dtype == torch.float32:
        baseline = (None,) * 3
    else:  # what PyTorch's own unfused pair reaches in this dtype
        baseline = _torch(x, weight, dout, dtype, op=unfused_torch)
    tols = (tolerance(dtype), _dx_tolerance(x, weight, dout, dtype), tolerance(dtype))
    for name, got, exp, base, tol in zip(
        ("out", "dx", "dweight"), (out, x.grad, weight.grad), expected, baseline, tols
    ):
        assert_close(got, exp, tol=tol, baseline=base, name=name)


def test_more_rows_than_programs(path):
    """Each persistent backward program takes many rows: dweight sums across all of them."""
    x, weight, dout = _inputs((37, 66), torch.float32)
    out = rmsnorm_swiglu(x, weight)
    out.backward(dout)
    for got, exp in zip((out, x.grad, weight.grad), _torch(x, weight, dout, torch.float64)):
        assert_close(got, exp)


def test_strided_rows_and_no_grad():
    x = random_tensor((6, 3 * 100))[:, :200]  # row stride 300
    weight = random_tensor(200, offset=1.0)
    assert_close(rmsnorm_swiglu(x, weight, eps=1e-5), unfused_torch(x.double(), weight.double(), 1e-5))
    assert not rmsnorm_swiglu(x, weight).requires_grad


def test_matches_the_unfused_pair():
    x, weight, _ = _inputs((8, 500), torch.float32)
    assert_close(rmsnorm_swiglu(x, weight), unfused_torch(x.double(), weight.double()))


def test_reference_is_the_definition():
    """The bench checks every provider against ``reference`` (fp32) before timing it."""
    x, weight, _ = _inputs((8, 500), torch.float32)
    assert_close(reference(x, weight), unfused_torch(x.double(), weight.double()), dtype=torch.float32)


@pytest.mark.skipif(INTERPRETED, reason="bf16 stores truncate under the interpreter: GPU only")
@pytest.mark.parametrize("n_half", [4096, 14336, 20000])
def test_bf16_llama_rows(n_half):
    x, weight, dout = _inputs((300, 2 * n_half), torch.bfloat16)
    out = rmsnorm_swiglu(x, weight)
    out.backward(dout)
    for got, exp in zip((out, x.grad, weight.grad), _torch(x, weight, dout, torch.float64)):
        assert_close(got, exp, dtype=torch.bfloat16)


def test_empty():
    out = rmsnorm_swiglu(torch.empty(0, 8, device=DEVICE), torch.ones(8, device=DEVICE))
    assert out.shape == (0, 4)


@pytest.mark.parametrize("shape", [(0, 8), (2, 0, 6)], ids=str)
def test_empty_input_gets_zero_gradients(shape):
    """No rows: x gets an empty gradient and weight a zero one, as from PyTorch (an empty input once
    returned a fresh leaf, cutting the graph)."""
    x = random_tensor(shape, requires_grad=True)
    weight = random_tensor(shape[-1], offset=1.0, requires_grad=True)
    assert_empty_gradients(rmsnorm_swiglu, x, weight)


def test_double_backward_raises():
    x, weight = random_tensor((3, 40), requires_grad=True), random_tensor(40, offset=1.0, requires_grad=True)
    assert_no_second_derivative(rmsnorm_swiglu, x, weight)


def test_numpy_eps_is_accepted():
    x, weight = random_tensor((3, 40)), random_tensor(40, offset=1.0)
    assert_close(rmsnorm_swiglu(x, weight, np.float32(1e-5)), reference(x.double(), weight.double(), 1e-5))


@pytest.mark.parametrize(
    ("x", "weight", "eps", "error", "match"),
    [
        ("x", torch.ones(4, device=DEVICE), 1e-6, TypeError, "x must be a torch.Tensor"),
        (torch.ones(2, 5, device=DEVICE), torch.ones(5, device=DEVICE), 1e-6, ValueError, "even"),
        (torch.ones(2, 4, device=DEVICE), torch.ones(6, device=DEVICE), 1e-6, ValueError, "weight has shape"),
        (
            torch.ones(2, 4, device=DEVICE),
            torch.ones(4, dtype=torch.float16, device=DEVICE),
            1e-6,
            TypeError,
            "dtypes differ",
        ),
        (torch.ones(2, 4, device=DEVICE), torch.ones(8, device=DEVICE)[::2], 1e-6, ValueError, "contiguous"),
        (torch.ones(2, 4, device=DEVICE), torch.ones(4, device=DEVICE), 0.0, ValueError, "eps must be"),
        (
            torch.ones(2, 4, dtype=torch.int64, device=DEVICE),
            torch.ones(4, device=DEVICE),
            1e-6,
            TypeError,
            "x has dtype",
        ),
    ],
)
def test_rejects_bad_input(x, weight, eps, error, match):
    with pytest.raises(error, match=match):
        rmsnorm_swiglu(x, weight, eps)


def test_rejects_too_many_rows():
    x = torch.ones(1, 2, device=DEVICE).expand(2**31, 2)  # 2**31 rows, one in memory
    with pytest.raises(ValueError, match="rows"):
        rmsnorm_swiglu(x, torch.ones(2, device=DEVICE))
