"""The fused op's backward on the page (through SwiGLU, then through the RMS norm), in float64,
equals autograd through the definition."""

import torch
import torch.nn.functional as F


def test_backward_closed_form():
    rows, n = 16, 23
    x = torch.randn(rows, 2 * n, dtype=torch.float64, requires_grad=True)
    w = (1 + 0.3 * torch.randn(2 * n, dtype=torch.float64)).requires_grad_()
    dout = torch.randn(rows, n, dtype=torch.float64)
    eps = 1e-6
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    y = x * r * w
    a, b = y.chunk(2, dim=-1)
    (F.silu(a) * b).backward(dout)

    with torch.no_grad():
        x_hat = x * r  # x̂ = x · rstd
        a, b = (x_hat * w).chunk(2, dim=-1)
        s = torch.sigmoid(a)
        da = dout * b * s * (1 + a * (1 - s))  # SwiGLU: ∂/∂a
        db = dout * a * s  # SwiGLU: ∂/∂b
        dy = torch.cat([da, db], dim=-1)
        g = dy * w  # dx̂ = dy ⊙ w
        dot = (g * x_hat).mean(-1, keepdim=True)  # (1/2N) Σ dx̂·x̂
        dx = r * (g - x_hat * dot)
        dw = (dy * x_hat).sum(0)
    torch.testing.assert_close(dx, x.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(dw, w.grad, rtol=1e-10, atol=1e-12)


def test_rms_norm_jacobian_entry():
    """∂x̂_i/∂x_j = rstd·(δ_ij − x̂_i x̂_j / 2N): the matrix behind the dot term."""
    n2 = 10
    x = torch.randn(n2, dtype=torch.float64)
    eps = 1e-6
    jac = torch.autograd.functional.jacobian(lambda v: v * torch.rsqrt(v.pow(2).mean() + eps), x)
    r = torch.rsqrt(x.pow(2).mean() + eps)
    x_hat = x * r
    closed = r * (torch.eye(n2, dtype=torch.float64) - torch.outer(x_hat, x_hat) / n2)
    torch.testing.assert_close(closed, jac, rtol=1e-10, atol=1e-12)
