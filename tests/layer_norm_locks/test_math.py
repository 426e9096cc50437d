"""The layer-norm backward derived on the page, checked against autograd in float64."""

from academy.testing import assert_close, random_tensor

import torch
import torch.nn.functional as F


def _normalise(x, eps):
    n = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    sigma = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    return (x - mu) / sigma, sigma, n


def test_jacobian_of_one_row_in_matrix_form():
    """∂x̂/∂x = (1/σ)(I − 11ᵀ/N − x̂x̂ᵀ/N), so ∂y/∂x = diag(γ)·that."""
    n, eps = 11, 1e-5
    x = random_tensor((n,), torch.float64, scale=2.0, offset=0.7)
    gamma = random_tensor((n,), torch.float64)
    beta = random_tensor((n,), torch.float64)
    x_hat, sigma, _ = _normalise(x, eps)
    ones = torch.ones(n, 1, dtype=torch.float64, device=x.device)
    j_hat = (
        torch.eye(n, dtype=torch.float64, device=x.device) - ones @ ones.T / n - torch.outer(x_hat, x_hat) / n
    ) / sigma
    expected = torch.autograd.functional.jacobian(lambda v: F.layer_norm(v, (n,), gamma, beta, eps), x)
    assert_close(torch.diag(gamma) @ j_hat, expected, name="Jacobian")


def test_vjp_closed_form_equals_autograd():
    """dx = (1/σ)(g − mean(g) − x̂·mean(g⊙x̂)) with g = dy⊙γ; dγ = Σ dy⊙x̂; dβ = Σ dy."""
    m, n, eps = 13, 37, 1e-5
    x = random_tensor((m, n), torch.float64, scale=0.5, offset=-2.3, requires_grad=True)
    gamma = random_tensor((n,), torch.float64, requires_grad=True)
    beta = random_tensor((n,), torch.float64, requires_grad=True)
    dy = random_tensor((m, n), torch.float64)
    F.layer_norm(x, (n,), gamma, beta, eps).backward(dy)
    with torch.no_grad():
        x_hat, sigma, _ = _normalise(x, eps)
        g = dy * gamma
        dx = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / sigma
        dgamma = (dy * x_hat).sum(0)
        dbeta = dy.sum(0)
    assert_close(dx, x.grad, name="dx")
    assert_close(dgamma, gamma.grad, name="dγ")
    assert_close(dbeta, beta.grad, name="dβ")


def test_the_projection_removes_mean_and_x_hat_directions():
    """The VJP is orthogonal to 1 and to x̂ (layer norm ignores shifts and scales of x)."""
    n = 64
    x = random_tensor((n,), torch.float64)
    x_hat, sigma, _ = _normalise(x, 0.0)
    g = random_tensor((n,), torch.float64)
    dx = (g - g.mean() - x_hat * (g * x_hat).mean()) / sigma
    assert abs(dx.sum().item()) < 1e-12 * g.abs().sum().item()
    assert abs((dx * x_hat).sum().item()) < 1e-10 * g.abs().sum().item()
