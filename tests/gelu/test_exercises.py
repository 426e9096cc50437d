"""The GeLU tutorial's exercise answers, against float64 PyTorch on fresh random inputs."""

from academy import DEVICE
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.gelu import exercises
from examples.gelu.exercises import geglu, gelu_tanh_sigmoid

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("shape", [(1,), (127,), (3, 1001), (2, 2049)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_sigmoid_form_matches_tanh_form(shape, dtype):
    x = random_tensor(shape, dtype, scale=3.0)
    expected = F.gelu(x.double(), approximate="tanh")
    out = gelu_tanh_sigmoid(x)
    assert out.dtype == dtype
    assert_close(out, expected, dtype=dtype, baseline=F.gelu(x, approximate="tanh"), name="x·σ(2z)")


def test_sigmoid_form_is_finite_for_large_inputs():
    x = torch.tensor([-1e4, -80.0, 80.0, 1e4], device=DEVICE)
    out = gelu_tanh_sigmoid(x)
    assert torch.isfinite(out).all() and torch.equal(out[2:], x[2:]) and (out[:2] == 0).all()


def test_half_plus_half_tanh_is_sigmoid_of_double():
    """The identity the answer rests on, in float64."""
    z = torch.linspace(-20, 20, 4001, dtype=torch.float64)
    assert torch.allclose(0.5 * (1 + torch.tanh(z)), torch.sigmoid(2 * z), rtol=0, atol=1e-15)


@pytest.mark.parametrize("shape", [(7,), (5, 1000), (3, 2, 1025)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_geglu_matches_torch(shape, dtype):
    gate, up = random_tensor(shape, dtype, scale=2.0), random_tensor(shape, dtype)
    expected = F.gelu(gate.double(), approximate="tanh") * up.double()
    baseline = F.gelu(gate, approximate="tanh") * up
    out = geglu(gate, up)
    assert out.dtype == dtype and out.shape == gate.shape
    assert_close(out, expected, dtype=dtype, baseline=baseline, name="geglu")


def test_geglu_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="must match"):
        geglu(random_tensor(8), random_tensor(9))
    with pytest.raises(ValueError, match="must match"):
        geglu(random_tensor(8), random_tensor(8, torch.float16))
    with pytest.raises(ValueError, match="non-contiguous"):
        geglu(random_tensor((4, 6)).t(), random_tensor((6, 4)))


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (gelu_tanh_sigmoid, lambda: (_grad(random_tensor(8)),)),
        (geglu, lambda: (random_tensor(8), _grad(random_tensor(8)))),
    ],
    ids=["gelu_tanh_sigmoid", "geglu"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
