"""Every stage of the chapter computes the same grouped product and its gradients (float64 PyTorch as the judge)."""

from academy import DEVICE
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.grouped_gemm import kernel as gg
from examples.grouped_gemm.stages import STAGES


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, gg)


@pytest.mark.parametrize("name", list(STAGES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_stage_matches_float64_forward_and_backward(name, dtype):
    sizes = [7, 0, 1, 30, 0, 13]
    x = random_tensor((sum(sizes), 40), dtype, requires_grad=True)
    w = random_tensor((len(sizes), 40, 48), dtype, requires_grad=True)
    y = STAGES[name](x, w, torch.tensor(sizes, device=DEVICE))
    dy = random_tensor(tuple(y.shape), dtype)
    y.backward(dy)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = torch.cat([rows @ w64[e] for e, rows in enumerate(x64.split(sizes))])
    y64.backward(dy.double())
    assert_close(y, y64, dtype=dtype, name=f"{name} y")
    assert_close(x.grad, x64.grad, dtype=dtype, name=f"{name} dx")
    assert_close(w.grad, w64.grad, dtype=dtype, name=f"{name} dw")


def test_the_loop_stage_reads_the_sizes_and_checks_them():
    """It synchronises anyway, so it can check what the other stages must take on trust."""
    x, w = random_tensor((7, 32)), random_tensor((3, 32, 16))
    with pytest.raises(ValueError, match="sum to 7"):
        STAGES["loop"](x, w, torch.tensor([2, 0, 4], device=DEVICE))
    with pytest.raises(ValueError, match="non-negative"):
        STAGES["loop"](x, w, torch.tensor([9, -2, 0], device=DEVICE))


def test_stages_are_in_chapter_order():
    assert list(STAGES) == ["loop", "static", "persistent", "tma"]
