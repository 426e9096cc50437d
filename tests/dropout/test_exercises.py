"""The dropout tutorial's exercise answer against the PyTorch Philox reference."""

from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.dropout import exercises
from examples.dropout.exercises import dropout_add
from examples.dropout.kernel import reference


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("shape", [(1,), (127,), (3, 1001)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_dropout_add_matches_reference(shape, dtype):
    x, r = random_tensor(shape, dtype), random_tensor(shape, dtype)
    seed = int(torch.randint(0, 2**40, ()).item())
    # The mask depends only on (seed, index); the expected sum is then exact in
    # float64, with no intermediate rounding of the dropped-out x.
    keep = reference(torch.ones(shape, device=x.device), 0.3, seed) != 0
    expected = r.double() + torch.where(keep, x.double() / 0.7, 0.0)
    baseline = r + reference(x, 0.3, seed)
    assert_close(dropout_add(x, r, 0.3, seed), expected, dtype=dtype, baseline=baseline, name="dropout_add")


def test_dropout_add_rejects_mismatch():
    with pytest.raises(ValueError, match="residual must match"):
        dropout_add(random_tensor(8), random_tensor(9), 0.1, 1)
    with pytest.raises(ValueError, match=r"p must be in"):
        dropout_add(random_tensor(8), random_tensor(8), 1.0, 1)


def test_dropout_add_refuses_inputs_that_require_grad():
    """Forward only: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match="dropout_add is forward only"):
        dropout_add(random_tensor(8, requires_grad=True), random_tensor(8), 0.1, 1)
