"""The backward-pass tutorial's exercise answer: gradcheck in float64, autograd in low precision."""

from academy.testing import FLOAT_DTYPES, assert_close, assert_no_second_derivative, poison_allocations, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.backward_pass import exercises
from examples.backward_pass.exercises import silu


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


def test_silu_gradcheck_float64():
    x = random_tensor((4, 7), torch.float64, scale=3.0, requires_grad=True)
    assert torch.autograd.gradcheck(silu, (x,), eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_silu_matches_autograd(dtype):
    x = random_tensor((3, 1001), dtype, scale=3.0, requires_grad=True)
    dy = random_tensor((3, 1001), dtype)
    y = silu(x)
    y.backward(dy)
    x64 = x.detach().double().requires_grad_()
    F.silu(x64).backward(dy.double())
    assert_close(y, F.silu(x64), dtype=dtype, baseline=F.silu(x.detach()), name="y")
    assert_close(x.grad, x64.grad, dtype=dtype, name="dx")


def test_silu_double_backward_raises():
    assert_no_second_derivative(silu, random_tensor((3, 40), requires_grad=True))
