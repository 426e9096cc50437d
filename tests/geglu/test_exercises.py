"""The GeGLU exercise answers against PyTorch."""

from academy.testing import assert_close, random_tensor

import pytest
import torch

from examples.geglu.exercises import max_form_gap, quick_geglu


def test_quick_geglu_forward_and_backward():
    gate = random_tensor((4, 777), scale=3.0, requires_grad=True)
    up = random_tensor((4, 777), requires_grad=True)
    dout = random_tensor((4, 777))
    out = quick_geglu(gate, up)
    out.backward(dout)
    g, u = gate.detach().double().requires_grad_(), up.detach().double().requires_grad_()
    ref = g * torch.sigmoid(1.702 * g) * u
    ref.backward(dout.double())
    for got, exp in ((out, ref), (gate.grad, g.grad), (up.grad, u.grad)):
        assert_close(got, exp.detach())


@pytest.mark.filterwarnings("ignore:overflow encountered in exp")
def test_max_form_gap_matches_float64():
    gap, where = max_form_gap()
    x = torch.linspace(-6, 6, 12001, dtype=torch.float64)
    ref = (torch.nn.functional.gelu(x) - torch.nn.functional.gelu(x, approximate="tanh")).abs()
    assert abs(gap - ref.max().item()) < 1e-5
    assert 1e-4 < gap < 1e-3 and 2.0 < abs(where) < 3.5
