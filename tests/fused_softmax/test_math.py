"""The softmax derivation on the fused_softmax page, checked in float64 against autograd.

Each function below is one displayed equation of the page, written in PyTorch.
"""

from academy.testing import assert_close

import pytest
import torch

torch_f64 = dict(dtype=torch.float64)


def softmax_stable(x):
    """y_i = exp(x_i − m) / Σ_j exp(x_j − m), m = max_j x_j."""
    shifted = x - x.max(dim=-1, keepdim=True).values
    return shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)


def softmax_jacobian(y):
    """∂y_i/∂x_j = y_i (δ_ij − y_j), i.e. J = diag(y) − y yᵀ."""
    return torch.diag(y) - torch.outer(y, y)


def softmax_vjp(y, dy):
    """dx = Jᵀ dy = y ⊙ (dy − ⟨y, dy⟩)."""
    return y * (dy - (y * dy).sum(dim=-1, keepdim=True))


def online_max_and_sum(x, chunk):
    """Running max m and running sum s, updated chunk by chunk:
    m' = max(m, max(chunk)), s' = s·exp(m − m') + Σ exp(chunk − m')."""
    m, s = torch.tensor(-torch.inf, **torch_f64), torch.tensor(0.0, **torch_f64)
    for start in range(0, x.numel(), chunk):
        block = x[start : start + chunk]
        new_m = torch.maximum(m, block.max())
        s = s * torch.exp(m - new_m) + torch.exp(block - new_m).sum()
        m = new_m
    return m, s


@pytest.mark.parametrize("n", [1, 2, 37, 300])
def test_stable_form_equals_definition(n):
    x = torch.randn(4, n, **torch_f64) * 5
    assert_close(softmax_stable(x), torch.softmax(x, dim=-1), tol=1e-14)


@pytest.mark.parametrize("n", [1, 5, 64])
def test_jacobian_matches_autograd(n):
    x = torch.randn(n, **torch_f64)
    autograd_jacobian = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), x)
    assert_close(softmax_jacobian(torch.softmax(x, -1)), autograd_jacobian, tol=1e-13)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (2, 5, 300)])
def test_vjp_matches_autograd(shape):
    x = torch.randn(shape, **torch_f64, requires_grad=True)
    dy = torch.randn(shape, **torch_f64)
    y = torch.softmax(x, dim=-1)
    (autograd_dx,) = torch.autograd.grad(y, x, dy)
    assert_close(softmax_vjp(y.detach(), dy), autograd_dx, tol=1e-13)


def test_jacobian_rows_sum_to_zero():
    """Adding a constant to every logit leaves y unchanged, so J·1 = 0."""
    y = torch.softmax(torch.randn(50, **torch_f64), -1)
    assert_close(softmax_jacobian(y).sum(dim=1), torch.zeros(50, **torch_f64), tol=1e-14)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_online_recurrence_equals_two_pass(chunk):
    x = torch.randn(777, **torch_f64) * 10
    m, s = online_max_and_sum(x, chunk)
    assert m == x.max()
    assert_close(s, torch.exp(x - x.max()).sum(), tol=1e-13)
