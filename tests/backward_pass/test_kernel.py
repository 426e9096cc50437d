"""The learnable swish: gradcheck through the kernels in float64, and autograd in low precision."""

from academy import DEVICE
from academy.testing import (
    FLOAT_DTYPES,
    assert_close,
    assert_empty_gradients,
    assert_no_second_derivative,
    cancellation_tolerance,
    poison_allocations,
    random_tensor,
)

import pytest
import torch

from examples.backward_pass import kernel
from examples.backward_pass.kernel import manual_backward, reference, swish


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


def test_gradcheck_in_float64_through_the_kernels():
    """Finite differences against our backward: the kernels themselves run in fp64."""
    x = random_tensor((3, 5), torch.float64, requires_grad=True)
    w = random_tensor((5,), torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(swish, (x, w), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_gradcheck_with_more_rows_than_one_block():
    x = random_tensor((kernel.BLOCK_M + 3, 2), torch.float64, requires_grad=True)
    w = random_tensor((2,), torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(swish, (x, w), eps=1e-6, atol=1e-8, rtol=1e-6)


def _dx_tolerance(x, w, dy, dtype):
    """The dtype's bar for the final rounding, plus the fp32 bar times ‖terms‖/‖dx‖ − 1.

    The kernel computes dx = dy·(s + u·s·(1 − s)), u = w·x, s = σ(u), in fp32: the sum vanishes at u ≈ −1.28
    (silu′'s root) and 1 − s cancels for large u, so its roundings are relative to dy·(s + |u|·s·(1 + s)), not to
    dx. On a lone fp32 element near the root dx failed both 1e-5 and twice PyTorch's error, which rounds
    differently (1 of 3000 seeds, torch.manual_seed(1592)).
    """
    x, w, dy = x.detach().double(), w.detach().double(), dy.double()
    u = w * x
    s = torch.sigmoid(u)
    return cancellation_tolerance(dtype, dy * (s + u.abs() * s * (1 + s)), dy * (s + u * s * (1 - s)))


@pytest.mark.parametrize("shape", [(1, 1), (7, 127), (33, 300), (2, 5, 1025)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward_match_autograd(shape, dtype):
    x = random_tensor(shape, dtype, scale=2.0, requires_grad=True)
    w = random_tensor(shape[-1:], dtype, requires_grad=True)
    dy = random_tensor(shape, dtype)
    y = swish(x, w)
    y.backward(dy)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = reference(x64, w64)
    y64.backward(dy.double())
    x_low, w_low = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    reference(x_low, w_low).backward(dy)  # PyTorch's own error in this dtype
    assert y.dtype == dtype and x.grad.dtype == dtype and w.grad.dtype == dtype
    assert_close(y, y64, dtype=dtype, name="y")
    dx_tol = _dx_tolerance(x, w, dy, dtype)  # why: σ + u·σ′ cancels near u ≈ −1.28 (see _dx_tolerance)
    assert_close(x.grad, x64.grad, tol=dx_tol, baseline=x_low.grad, name="dx")
    assert_close(w.grad, w64.grad, dtype=dtype, baseline=w_low.grad, name="dw")


def test_hand_written_vjp_equals_autograd_in_float64():
    x = random_tensor((9, 13), torch.float64, requires_grad=True)
    w = random_tensor((13,), torch.float64, requires_grad=True)
    dy = random_tensor((9, 13), torch.float64)
    (x * torch.sigmoid(w * x)).backward(dy)
    dx, dw = manual_backward(x.detach(), w.detach(), dy)
    assert_close(dx, x.grad, name="dx")
    assert_close(dw, w.grad, name="dw")


def test_only_the_gradients_asked_for():
    x = random_tensor((4, 6), requires_grad=True)
    w = random_tensor((6,))
    swish(x, w).sum().backward()
    assert x.grad is not None and w.grad is None
    x2, w2 = random_tensor((4, 6)), random_tensor((6,), requires_grad=True)
    swish(x2, w2).sum().backward()
    assert w2.grad is not None


def test_empty_rows():
    x, w = torch.empty(0, 4, device=DEVICE), random_tensor((4,))
    assert swish(x, w).shape == (0, 4)


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (2, 0, 5)], ids=str)
def test_empty_inputs_get_zero_gradients(shape):
    x, w = random_tensor(shape, requires_grad=True), random_tensor(shape[-1:], requires_grad=True)
    assert_empty_gradients(swish, x, w)


def test_double_backward_raises():
    """The backward kernel has no backward: a gradient penalty raises instead of coming out wrong."""
    x, w = random_tensor((5, 30), requires_grad=True), random_tensor((30,), requires_grad=True)
    assert_no_second_derivative(swish, x, w)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="w must have shape"):
        swish(random_tensor((3, 4)), random_tensor((5,)))
    with pytest.raises(TypeError, match="dtypes differ"):
        swish(random_tensor((3, 4)), random_tensor((4,), torch.float16))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        swish([1.0], random_tensor((1,)))
    with pytest.raises(ValueError, match="at least one dimension"):
        swish(random_tensor(()), random_tensor((1,)))
