"""geglu, exact and tanh forms: forward and both gradients against float64 PyTorch, each form
against its own reference."""

import pytest
import torch
import torch.nn.functional as F

from academy import DEVICE, INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor
from examples.geglu.kernel import APPROXIMATIONS, geglu, reference
from examples.swiglu import kernel as gated_layer

SHAPES = [(7,), (3, 127), (5, 1000), (2, 3, 1025)]

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp")


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, gated_layer)


def _torch(gate, up, dout, approximate, dtype):
    g, u = gate.detach().to(dtype).requires_grad_(), up.detach().to(dtype).requires_grad_()
    out = F.gelu(g, approximate=approximate) * u
    out.backward(dout.to(dtype))
    return out.detach(), g.grad, u.grad


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_forward_and_backward(shape, dtype, approximate):
    gate = random_tensor(shape, dtype, scale=3.0, requires_grad=True)
    up = random_tensor(shape, dtype, requires_grad=True)
    dout = random_tensor(shape, dtype)
    out = geglu(gate, up, approximate)
    out.backward(dout)
    assert out.dtype == dtype and gate.grad.dtype == dtype and up.grad.dtype == dtype
    expected = _torch(gate, up, dout, approximate, torch.float64)
    baseline = _torch(gate, up, dout, approximate, dtype) if dtype != torch.float32 else (None,) * 3
    for name, got, exp, base in zip(("out", "dgate", "dup"), (out, gate.grad, up.grad), expected, baseline):
        assert_close(got, exp, dtype=dtype, baseline=base, name=f"{approximate}:{name}")


def test_the_two_forms_differ_and_each_matches_its_own():
    """Guards against testing both forms against one reference: at |x|≈2 they differ by ~1e-3."""
    gate = torch.linspace(-4, 4, 801, dtype=torch.float32, device=DEVICE)
    up = torch.ones_like(gate)
    exact, approx = geglu(gate, up, "none"), geglu(gate, up, "tanh")
    assert (exact - approx).abs().max() > 1e-4
    assert_close(exact, F.gelu(gate.double()), name="exact")
    assert_close(approx, F.gelu(gate.double(), approximate="tanh"), name="tanh")


@pytest.mark.skipif(INTERPRETED, reason="bf16 stores truncate under the interpreter: GPU only")
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_bf16_end_to_end_large(approximate):
    gate = random_tensor((64, 14336), torch.bfloat16, scale=3.0, requires_grad=True)
    up = random_tensor((64, 14336), torch.bfloat16, requires_grad=True)
    dout = random_tensor((64, 14336), torch.bfloat16)
    out = geglu(gate, up, approximate)
    out.backward(dout)
    for got, exp in zip((out, gate.grad, up.grad), _torch(gate, up, dout, approximate, torch.float64)):
        assert_close(got, exp, dtype=torch.bfloat16)


def test_chunked_views_and_extremes():
    x = random_tensor((9, 2 * 501), scale=4.0)
    gate, up = x.chunk(2, dim=-1)
    assert_close(geglu(gate, up, "tanh"), reference(gate.double(), up.double(), "tanh"))
    big = torch.tensor([-1e4, -50.0, 50.0, 1e4], requires_grad=True, device=DEVICE)
    for approximate in APPROXIMATIONS:
        out = geglu(big, torch.ones(4, device=DEVICE), approximate)
        out.backward(torch.ones(4, device=DEVICE))
        assert torch.isfinite(out).all() and torch.isfinite(big.grad).all()
        big.grad = None


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="approximate must be one of"):
        geglu(torch.ones(3, device=DEVICE), torch.ones(3, device=DEVICE), "erf")
    with pytest.raises(ValueError, match="shapes differ"):
        geglu(torch.ones(3, device=DEVICE), torch.ones(4, device=DEVICE))
    with pytest.raises(TypeError, match="up has dtype"):
        geglu(torch.ones(3, device=DEVICE), torch.ones(3, dtype=torch.float64, device=DEVICE))
