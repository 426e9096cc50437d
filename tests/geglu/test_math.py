"""The GeLU derivatives on the page (exact and tanh forms), in float64, equal autograd."""

import math

import torch
import torch.nn.functional as F

A = math.sqrt(2 / math.pi)
C = 0.044715


def _autograd(x, approximate):
    x = x.clone().requires_grad_()
    F.gelu(x, approximate=approximate).sum().backward()
    return x.grad


def test_exact_gelu_derivative():
    x = torch.linspace(-10, 10, 2001, dtype=torch.float64)
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))  # Φ(x)
    pdf = torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # φ(x) = Φ'(x), from erf'(z) = 2/√π·e^{−z²}
    torch.testing.assert_close(cdf + x * pdf, _autograd(x, "none"), rtol=1e-12, atol=1e-12)


def test_tanh_gelu_derivative_and_its_factorised_form():
    x = torch.linspace(-10, 10, 2001, dtype=torch.float64)
    t = torch.tanh(A * (x + C * x**3))
    d_inner = A * (1 + 3 * C * x**2)
    kernel_form = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner
    v = 1 + t  # 1 − t² = v(2 − v)
    factorised = 0.5 * v * (1 + x * (2 - v) * d_inner)
    expected = _autograd(x, "tanh")
    torch.testing.assert_close(kernel_form, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(factorised, expected, rtol=1e-12, atol=1e-12)


def test_geglu_gradients():
    g = torch.randn(50, 31, dtype=torch.float64, requires_grad=True)
    u = torch.randn(50, 31, dtype=torch.float64, requires_grad=True)
    dout = torch.randn(50, 31, dtype=torch.float64)
    (F.gelu(g) * u).backward(dout)
    x = g.detach()
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    pdf = torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    torch.testing.assert_close(dout * x * cdf, u.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dout * u.detach() * (cdf + x * pdf), g.grad, rtol=1e-12, atol=1e-12)
