"""The exercise answers of "Why Triton" (examples/why_triton/answers.py)."""

from academy import DEVICE
from academy.testing import random_tensor

import pytest
import torch

from examples.why_triton.answers import add_grid_stride, add_relu, bytes_fused, bytes_unfused


@pytest.mark.parametrize("n, n_programs", [(1, 1), (777, 3), (5000, 4)])
def test_grid_stride_add(n, n_programs):
    x, y = random_tensor(n, torch.float32, device=DEVICE), random_tensor(n, torch.float32, device=DEVICE)
    assert torch.equal(add_grid_stride(x, y, n_programs=n_programs), x + y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_add_relu(dtype):
    x, y = random_tensor(3001, dtype, device=DEVICE), random_tensor(3001, dtype, device=DEVICE)
    torch.testing.assert_close(add_relu(x, y), torch.relu(x + y))


def test_fusion_saves_two_passes():
    assert bytes_unfused(1000, 4) == 20_000 and bytes_fused(1000, 4) == 12_000


def test_bad_inputs():
    with pytest.raises(ValueError):
        add_relu(torch.randn(4, device=DEVICE), torch.randn(5, device=DEVICE))
    with pytest.raises(ValueError, match="n_programs"):
        add_grid_stride(torch.randn(4, device=DEVICE), torch.randn(4, device=DEVICE), n_programs=0)
