"""The RMS-norm derivation on docs/kernels/rms_norm.md, checked against autograd in float64."""

from academy.testing import assert_close
from academy.testing import random_tensor as _random_tensor

import pytest
import torch
import torch.nn.functional as F


def random_tensor(*args, **kwargs):
    """The derivations are checked on the CPU in float64 on every machine (a GPU run too)."""
    return _random_tensor(*args, device="cpu", **kwargs)


EPS = 1e-6


def _stats(x, eps=EPS):
    r = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)  # ε inside the root
    return r, x / r, x.shape[-1]


@pytest.mark.parametrize("eps", [EPS, 0.5])
def test_partial_of_r(eps):
    """∂r/∂x_j = x_j/(N r) = x̂_j/N."""
    x = random_tensor((9,), torch.float64, scale=1.5)
    _, x_hat, n = _stats(x, eps)
    expected = torch.autograd.functional.jacobian(lambda v: _stats(v, eps)[0].squeeze(), x)
    assert_close(x_hat / n, expected, name="∂r/∂x")


@pytest.mark.parametrize("eps", [EPS, 0.5])
def test_jacobian_two_terms(eps):
    """∂x̂_i/∂x_j = (1/r)(δ_ij − x̂_i x̂_j/N): direct term and the term through r."""
    n = 10
    x = random_tensor((n,), torch.float64, scale=2.0, offset=0.3)
    r, x_hat, _ = _stats(x, eps)
    closed = (torch.eye(n, dtype=torch.float64) - torch.outer(x_hat, x_hat) / n) / r
    expected = torch.autograd.functional.jacobian(lambda v: _stats(v, eps)[1], x)
    assert_close(closed, expected, name="∂x̂/∂x")


def test_compact_vjp_and_weight_gradient():
    """dx = (1/r)(g − x̂·c), g = dy⊙w, c = mean(g⊙x̂); dw = Σ_rows dy⊙x̂."""
    m, n = 13, 37
    x = random_tensor((m, n), torch.float64, scale=2.0, offset=0.3, requires_grad=True)
    w = random_tensor((n,), torch.float64, requires_grad=True)
    dy = random_tensor((m, n), torch.float64)
    F.rms_norm(x, (n,), w, EPS).backward(dy)
    with torch.no_grad():
        r, x_hat, _ = _stats(x)
        g = dy * w
        c = (g * x_hat).mean(-1, keepdim=True)
        dx = (g - x_hat * c) / r
    assert_close(dx, x.grad, name="dx")
    assert_close((dy * x_hat).sum(0), w.grad, name="dw")


def test_gradient_is_orthogonal_to_x_when_eps_is_zero():
    """With ε = 0, RMS norm ignores the scale of x, so xᵀ·dx = 0; ε > 0 breaks it slightly."""
    m, n = 4, 50
    x = random_tensor((m, n), torch.float64, requires_grad=True)
    dy = random_tensor((m, n), torch.float64)
    F.rms_norm(x, (n,), None, 0.0).backward(dy)
    assert (x.grad * x).sum(-1).abs().max() < 1e-10
