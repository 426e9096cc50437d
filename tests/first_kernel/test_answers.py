"""The answers to the exercises of the first-kernel tutorial."""

from academy import DEVICE
from academy.testing import IRREGULAR_SIZES, assert_close, poison_allocations, random_tensor, underflow_tolerance

import pytest
import torch

from examples.first_kernel import answers as first_kernel
from examples.first_kernel.answers import elements_left_unwritten, scale


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, first_kernel)


@pytest.mark.parametrize("n", IRREGULAR_SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_scale_matches_torch(n, dtype):
    x = random_tensor(n, dtype)
    expected = -1.75 * x.double()
    assert_close(scale(x, -1.75, block_size=128), expected, tol=underflow_tolerance(dtype, expected))


def test_scale_rejects_a_strided_view():
    with pytest.raises(ValueError, match="contiguous"):
        scale(random_tensor((8, 8)).t(), 2.0)


def test_scale_of_nothing_is_nothing():
    assert scale(torch.empty(0, device=DEVICE), 3.0).shape == (0,)


@pytest.mark.parametrize("n, block, left", [(1000, 256, 232), (1024, 256, 0), (255, 256, 255)])
def test_floor_division_drops_the_tail(n, block, left):
    assert elements_left_unwritten(n, block) == left
