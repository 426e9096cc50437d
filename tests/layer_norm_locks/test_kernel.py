"""Tutorial layer norm: forward and all three gradients against float64 autograd, locks released."""

from academy import DEVICE
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

from examples.layer_norm_locks import kernel
from examples.layer_norm_locks.kernel import group_size_m, layer_norm


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


def _inputs(shape, dtype):
    n = shape[-1]
    x = random_tensor(shape, dtype, scale=0.5, offset=-2.3, requires_grad=True)
    w = random_tensor((n,), dtype, scale=0.3, offset=1.0, requires_grad=True)
    b = random_tensor((n,), dtype, scale=0.3, requires_grad=True)
    return x, w, b


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (37, 127), (5, 1000), (2, 3, 1025)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward_match_float64_autograd(shape, dtype):
    x, w, b = _inputs(shape, dtype)
    dy = random_tensor(shape, dtype)
    y = layer_norm(x, w, b, 1e-5)
    y.backward(dy)
    leaves64 = [t.detach().double().requires_grad_() for t in (x, w, b)]
    y64 = F.layer_norm(leaves64[0], shape[-1:], leaves64[1], leaves64[2], 1e-5)
    y64.backward(dy.double())
    low = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    y_low = F.layer_norm(low[0].float(), shape[-1:], low[1].float(), low[2].float(), 1e-5).to(dtype)
    y_low.backward(dy)
    assert_close(y, y64, dtype=dtype, baseline=y_low, name="y")
    for name, ours, exact, torch_low in zip(("dx", "dw", "db"), (x, w, b), leaves64, low):
        assert ours.grad.dtype == dtype
        tol = _dx_tolerance(dtype, leaves64, dy) if name == "dx" else None
        assert_close(ours.grad, exact.grad, dtype=dtype, tol=tol, baseline=torch_low.grad, name=name)


def _dx_tolerance(dtype, leaves64, dy):
    """dx = rstd·(w·dy − mean(w·dy) − x̂·mean(w·dy·x̂)) cancels; on rows of one column it is exactly 0
    while rstd = 1/√eps ≈ 316 scales the terms' fp32 roundings. The bar follows the terms
    (docs/contributing.md, tolerances), and is absolute where the exact dx is zero."""
    x, w, _ = (t.detach() for t in leaves64)
    mean = x.mean(-1, keepdim=True)
    rstd = (x.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    x_hat, g = (x - mean) * rstd, w * dy.double()
    terms = rstd * (g.abs() + g.mean(-1, keepdim=True).abs() + x_hat.abs() * (g * x_hat).mean(-1, keepdim=True).abs())
    exact = rstd * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    if torch.linalg.vector_norm(exact) == 0:
        return tolerance(torch.float32) * torch.linalg.vector_norm(terms).item()
    return cancellation_tolerance(dtype, terms, exact)


def test_more_rows_than_groups_share_buffers():
    """Many rows per lock: every buffer is written first, then added to under the lock."""
    x, w, b = _inputs((70, 33), torch.float32)
    assert group_size_m(70, 33) == 70  # capped by the rows
    kernel_groups = group_size_m
    try:
        kernel.group_size_m = lambda n_rows, n_cols: 4  # force 17 or 18 rows onto each lock
        dy = random_tensor((70, 33))
        layer_norm(x, w, b).backward(dy)
    finally:
        kernel.group_size_m = kernel_groups
    leaves = [t.detach().double().requires_grad_() for t in (x, w, b)]
    F.layer_norm(leaves[0], (33,), leaves[1], leaves[2]).backward(dy.double())
    for ours, exact in zip((x, w, b), leaves):
        assert_close(ours.grad, exact.grad, dtype=torch.float32)


def test_locks_are_released_and_counts_set(monkeypatch):
    seen = {}
    real_zeros = torch.zeros

    def spy_zeros(*args, **kwargs):
        t = real_zeros(*args, **kwargs)
        if kwargs.get("dtype") == torch.int32:
            seen["locks"] = t
        return t

    monkeypatch.setattr(kernel.torch, "zeros", spy_zeros, raising=False)
    x, w, b = _inputs((9, 40), torch.float32)
    layer_norm(x, w, b).sum().backward()
    groups = group_size_m(9, 40)
    locks = seen["locks"]
    assert locks[:groups].eq(0).all(), "a lock was left held"
    assert locks[groups:].eq(1).all(), "a buffer was never marked written"


def test_group_size_heuristic():
    assert [group_size_m(4096, n) for n in (768, 4096, 8192, 16384)] == [256, 128, 96, 64]
    assert group_size_m(3, 4096) == 3


def test_no_grad_path_and_empty():
    x, w, b = _inputs((4, 10), torch.float32)
    with torch.no_grad():
        y = layer_norm(x, w, b)
    assert not y.requires_grad
    assert layer_norm(torch.empty(0, 10, device=DEVICE), w.detach(), b.detach()).shape == (0, 10)


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no affine"])
def test_empty_batch_gets_zero_gradients(affine):
    """No rows: x gets an empty gradient, weight and bias zero ones, as from PyTorch (an empty
    input once returned a fresh leaf, cutting the graph)."""
    x, w, b = _inputs((0, 10), torch.float32)
    assert_empty_gradients(layer_norm, x, *((w, b) if affine else (None, None)))


def test_double_backward_raises():
    assert_no_second_derivative(layer_norm, *_inputs((3, 40), torch.float32))


@pytest.mark.parametrize("weight, bias", [(False, True), (True, False), (False, False)])
def test_weight_or_bias_none(weight, bias):
    """As F.layer_norm: None is no scale or no shift; the other tensors keep their gradients."""
    x, w, b = _inputs((6, 50), torch.float32)
    w, b = (w if weight else None), (b if bias else None)
    dy = random_tensor((6, 50))
    layer_norm(x, w, b, np.float32(1e-5)).backward(dy)  # a NumPy eps is a number like any other
    leaves = [t.detach().double().requires_grad_() if t is not None else None for t in (x, w, b)]
    F.layer_norm(leaves[0], (50,), leaves[1], leaves[2], 1e-5).backward(dy.double())
    for name, ours, exact in zip(("dx", "dw", "db"), (x, w, b), leaves):
        if ours is not None:
            assert_close(ours.grad, exact.grad, dtype=torch.float32, name=name)


def test_bad_inputs_are_rejected():
    x, w, b = (t.detach() for t in _inputs((4, 10), torch.float32))
    with pytest.raises(ValueError, match=r"weight must have shape \(10,\)"):
        layer_norm(x, w[:5], b)
    with pytest.raises(TypeError, match="dtypes differ"):
        layer_norm(x, w.half(), b)
    with pytest.raises(ValueError, match="too wide"):
        layer_norm(
            random_tensor((1, kernel.MAX_N + 1)), random_tensor(kernel.MAX_N + 1), random_tensor(kernel.MAX_N + 1)
        )
    with pytest.raises(ValueError, match="eps must be a positive"):
        layer_norm(x, w, b, eps=0.0)
    with pytest.raises(ValueError, match="non-empty last dimension"):
        layer_norm(random_tensor((3, 0)), random_tensor(0), random_tensor(0))
