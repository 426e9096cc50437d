"""The SwiGLU exercise answers against PyTorch."""

from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.swiglu import exercises
from examples.swiglu import kernel as gated_layer
from examples.swiglu.exercises import reglu, swish_glu


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)
    poison_allocations(monkeypatch, gated_layer)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_reglu_forward_and_backward(dtype):
    gate = random_tensor((5, 1001), dtype, requires_grad=True)
    up = random_tensor((5, 1001), dtype, requires_grad=True)
    dout = random_tensor((5, 1001), dtype)
    out = reglu(gate, up)
    out.backward(dout)
    g, u = gate.detach().double().requires_grad_(), up.detach().double().requires_grad_()
    ref = F.relu(g) * u
    ref.backward(dout.double())
    for got, exp in ((out, ref), (gate.grad, g.grad), (up.grad, u.grad)):
        assert_close(got, exp.detach(), dtype=dtype, baseline=exp.detach().to(dtype))


@pytest.mark.parametrize("beta", [1.0, 0.5, 1.702])
def test_swish_glu(beta):
    gate, up = random_tensor((3, 1001), scale=3.0), random_tensor((3, 1001))
    g = gate.double()
    assert_close(swish_glu(gate, up, beta), g * torch.sigmoid(beta * g) * up.double())


def test_swish_glu_rejects_views():
    x = random_tensor((4, 20))
    with pytest.raises(ValueError, match="contiguous"):
        swish_glu(*x.chunk(2, dim=-1))


def test_swish_glu_refuses_inputs_that_require_grad():
    """It has no backward: a result without gradients would cut the graph silently."""
    gate, up = random_tensor((3, 20), requires_grad=True), random_tensor((3, 20))
    with pytest.raises(ValueError, match="swish_glu is forward only"):
        swish_glu(gate, up)
    with torch.no_grad():
        assert_close(swish_glu(gate, up), F.silu(gate.double()) * up.double())
