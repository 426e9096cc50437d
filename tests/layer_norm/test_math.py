"""The layer-norm derivation on docs/kernels/layer_norm.md, checked against autograd in float64.

Each test implements one equation of the page in PyTorch (float64) and
compares it with what autograd computes from the definition.
"""

from academy.testing import assert_close
from academy.testing import random_tensor as _random_tensor

import pytest
import torch
import torch.nn.functional as F


def random_tensor(*args, **kwargs):
    """The derivations are checked on the CPU in float64 on every machine (a GPU run too)."""
    return _random_tensor(*args, device="cpu", **kwargs)


EPS = 1e-5


def _stats(x, eps=EPS):
    n = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    sigma = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)  # ε inside the root
    return mu, sigma, (x - mu) / sigma, n


@pytest.mark.parametrize("eps", [EPS, 0.5])  # a large ε shows the derivation does not assume ε = 0
def test_partials_of_mu_and_sigma(eps):
    """∂μ/∂x_j = 1/N and ∂σ/∂x_j = x̂_j/N, with σ = √(var + ε)."""
    n = 9
    x = random_tensor((n,), torch.float64, scale=1.5, offset=0.4)
    d_mu = torch.autograd.functional.jacobian(lambda v: v.mean(), x)
    d_sigma = torch.autograd.functional.jacobian(lambda v: _stats(v, eps)[1].squeeze(), x)
    _, _, x_hat, _ = _stats(x, eps)
    assert_close(d_mu, torch.full((n,), 1.0 / n, dtype=torch.float64), name="∂μ/∂x")
    assert_close(d_sigma, x_hat / n, name="∂σ/∂x")


@pytest.mark.parametrize("eps", [EPS, 0.5])
def test_jacobian_three_terms(eps):
    """∂x̂_i/∂x_j = (1/σ)(δ_ij − 1/N − x̂_i x̂_j/N): direct, through μ, through σ."""
    n = 11
    x = random_tensor((n,), torch.float64, scale=2.0, offset=0.7)
    _, sigma, x_hat, _ = _stats(x, eps)
    direct = torch.eye(n, dtype=torch.float64) / sigma
    through_mu = -torch.ones(n, n, dtype=torch.float64) / (n * sigma)
    through_sigma = -torch.outer(x_hat, x_hat) / (n * sigma)
    expected = torch.autograd.functional.jacobian(lambda v: _stats(v, eps)[2], x)
    assert_close(direct + through_mu + through_sigma, expected, name="∂x̂/∂x")


def test_full_jacobian_with_affine():
    """∂y/∂x = diag(γ)·∂x̂/∂x for y = γ⊙x̂ + β."""
    n = 8
    x, gamma, beta = (random_tensor((n,), torch.float64) for _ in range(3))
    _, sigma, x_hat, _ = _stats(x)
    j_hat = (torch.eye(n, dtype=torch.float64) - 1.0 / n - torch.outer(x_hat, x_hat) / n) / sigma
    expected = torch.autograd.functional.jacobian(lambda v: F.layer_norm(v, (n,), gamma, beta, EPS), x)
    assert_close(torch.diag(gamma) @ j_hat, expected, name="∂y/∂x")


def _autograd(m=13, n=37):
    x = random_tensor((m, n), torch.float64, scale=0.5, offset=-2.3, requires_grad=True)
    gamma = random_tensor((n,), torch.float64, requires_grad=True)
    beta = random_tensor((n,), torch.float64, requires_grad=True)
    dy = random_tensor((m, n), torch.float64)
    F.layer_norm(x, (n,), gamma, beta, EPS).backward(dy)
    return x, gamma, beta, dy


def test_compact_vjp_and_weight_gradients():
    """dx = (1/σ)(g − c₂ − x̂·c₁), g = dy⊙γ, c₁ = mean(g⊙x̂), c₂ = mean(g); dγ = Σ_rows dy⊙x̂; dβ = Σ_rows dy."""
    x, gamma, beta, dy = _autograd()
    with torch.no_grad():
        _, sigma, x_hat, _ = _stats(x)
        g = dy * gamma
        c1 = (g * x_hat).mean(-1, keepdim=True)
        c2 = g.mean(-1, keepdim=True)
        dx = (g - c2 - x_hat * c1) / sigma
    assert_close(dx, x.grad, name="dx")
    assert_close((dy * x_hat).sum(0), gamma.grad, name="dγ")
    assert_close(dy.sum(0), beta.grad, name="dβ")


def test_two_stage_sum_equals_one_sum():
    """dγ = Σ_p (Σ_{rows of program p} dy⊙x̂): any split of the rows into programs gives the same sum."""
    x, gamma, _, dy = _autograd(m=50)
    with torch.no_grad():
        _, _, x_hat, _ = _stats(x)
        programs = 7
        partials = torch.stack([(dy[p::programs] * x_hat[p::programs]).sum(0) for p in range(programs)])
    assert_close(partials.sum(0), gamma.grad, name="dγ from partial rows")


def test_chunk_merge_equals_variance():
    """Chan's merge of per-chunk (count, mean, M) triples gives the row's mean and variance (the chunked
    kernel merges chunk after chunk; the last chunk is shorter)."""
    x = random_tensor((5, 300), torch.float64, scale=0.01, offset=1000.0)
    x[:, 0] = 3e4  # an outlier first value: what the shifted identity with s = x₀ was bad at
    mean, m2, seen = torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64), 0
    for chunk in x.split(64, dim=-1):
        count = chunk.shape[-1]
        chunk_mean = chunk.mean(-1)
        delta = chunk_mean - mean
        mean = mean + delta * count / (seen + count)
        m2 = m2 + ((chunk - chunk_mean[:, None]) ** 2).sum(-1) + delta**2 * seen * count / (seen + count)
        seen += count
    assert_close(mean, x.mean(-1), tol=1e-12, name="merged mean")
    assert_close(m2 / seen, x.var(-1, unbiased=False), tol=1e-12, name="merged variance")


def test_gradient_is_invariant_to_shifting_x():
    """Layer norm ignores a constant added to a row, so every row of dx sums to 0."""
    x, _, _, _ = _autograd()
    assert x.grad.sum(-1).abs().max() < 1e-10
