"""The SiLU / SwiGLU derivatives on the page, in float64, equal autograd."""

import torch
import torch.nn.functional as F


def test_silu_derivative_closed_form():
    x = torch.linspace(-30, 30, 2001, dtype=torch.float64, requires_grad=True)
    F.silu(x).sum().backward()
    s = torch.sigmoid(x.detach())
    closed = s * (1 + x.detach() * (1 - s))  # σ(x)(1 + x(1 − σ(x)))
    quotient_rule = (1 + torch.exp(-x.detach()) + x.detach() * torch.exp(-x.detach())) / (
        1 + torch.exp(-x.detach())
    ) ** 2
    torch.testing.assert_close(closed, x.grad, rtol=1e-12, atol=1e-12)
    finite = x.detach().abs() < 20  # the quotient-rule form overflows for large −x: the page says so
    torch.testing.assert_close(quotient_rule[finite], x.grad[finite], rtol=1e-12, atol=1e-12)


def test_swiglu_gradients_closed_form():
    g = torch.randn(64, 37, dtype=torch.float64, requires_grad=True)
    u = torch.randn(64, 37, dtype=torch.float64, requires_grad=True)
    dout = torch.randn(64, 37, dtype=torch.float64)
    (F.silu(g) * u).backward(dout)
    s = torch.sigmoid(g.detach())
    dup = dout * g.detach() * s  # dout · silu(g)
    dgate = dout * u.detach() * s * (1 + g.detach() * (1 - s))  # dout · up · silu'(g)
    torch.testing.assert_close(dup, u.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dgate, g.grad, rtol=1e-12, atol=1e-12)
