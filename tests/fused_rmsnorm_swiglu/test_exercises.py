"""The fused RMSNorm + SwiGLU exercise answers."""

from fractions import Fraction

from academy import DEVICE
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.fused_rmsnorm_swiglu import exercises
from examples.fused_rmsnorm_swiglu.exercises import predicted_speedup, rmsnorm_geglu


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


def test_predicted_speedup():
    assert predicted_speedup("fwd") == Fraction(7, 3)
    assert predicted_speedup("fwd+bwd") == Fraction(9, 4)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rmsnorm_geglu(dtype):
    x = random_tensor((2, 3, 2 * 501), dtype, scale=2.0)
    weight = random_tensor(2 * 501, dtype, scale=0.3, offset=1.0)
    x64, w64 = x.double(), weight.double()
    y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64
    a, b = y.chunk(2, dim=-1)
    expected = F.gelu(a, approximate="tanh") * b
    assert_close(rmsnorm_geglu(x, weight), expected, dtype=dtype, baseline=expected.to(dtype))


def test_rmsnorm_geglu_rejects_wide_rows():
    with pytest.raises(ValueError, match="one-pass"):
        rmsnorm_geglu(torch.ones(1, 2 * 16385, device=DEVICE), torch.ones(2 * 16385, device=DEVICE))


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (rmsnorm_geglu, lambda: (_grad(random_tensor((3, 8))), random_tensor(8))),
    ],
    ids=["rmsnorm_geglu"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
