"""The cross-entropy exercise answers, against PyTorch."""

from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.cross_entropy import exercises
from examples.cross_entropy.exercises import online_logsumexp, row_logsumexp
from examples.cross_entropy.kernel import MAX_BLOCK_V


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("block", [1, 8, 100, 2048])
def test_online_logsumexp(block):
    x = 30 * torch.randn(6, 1000, dtype=torch.float64)
    torch.testing.assert_close(online_logsumexp(x, block), torch.logsumexp(x, dim=1))


@pytest.mark.parametrize("n_cols", [3, 1000, MAX_BLOCK_V + 11])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_row_logsumexp(n_cols, dtype):
    x = random_tensor((5, n_cols), dtype, scale=20.0)
    assert_close(row_logsumexp(x), torch.logsumexp(x.double(), dim=1), dtype=torch.float32)


def test_row_logsumexp_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        row_logsumexp(random_tensor(5))
    with pytest.raises(TypeError, match="dtype"):
        row_logsumexp(random_tensor((2, 3)).double())
