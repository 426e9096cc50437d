"""The layer-norm exercise answers, against PyTorch on fresh random inputs."""

from academy import INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.layer_norm import exercises
from examples.layer_norm.exercises import add_layer_norm, welford_row_stats


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 1000)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_add_layer_norm(shape, dtype):
    if dtype == torch.bfloat16 and INTERPRETED:
        pytest.skip("bf16 rounding of h is truncation under the interpreter")
    n = shape[-1]
    x, r = random_tensor(shape, dtype), random_tensor(shape, dtype)
    w, b = random_tensor(n, dtype, offset=1.0), random_tensor(n, dtype)
    y, h = add_layer_norm(x, r, w, b)
    h_torch = x + r
    assert torch.equal(h, h_torch)
    expected = F.layer_norm(h_torch.double(), (n,), w.double(), b.double(), 1e-5)
    baseline = F.layer_norm(h_torch, (n,), w, b, 1e-5)
    assert_close(y, expected, dtype=dtype, baseline=baseline, name="y")


def test_add_layer_norm_rejects_mismatched_residual():
    with pytest.raises(ValueError, match="shapes differ"):
        add_layer_norm(random_tensor((3, 8)), random_tensor((3, 9)), random_tensor(8), random_tensor(8))


@pytest.mark.parametrize("n", [1, 1000, 3001])
def test_welford_row_stats(n):
    x = random_tensor((4, n), scale=0.01, offset=100.0)
    mean, var = welford_row_stats(x, block_n=256)
    assert_close(mean, x.double().mean(-1), dtype=torch.float32, name="mean")
    if n > 1:
        assert_close(var, x.double().var(-1, unbiased=False), tol=1e-3, name="var")
    else:
        assert torch.equal(var, torch.zeros_like(var))


def test_add_layer_norm_rejects_rows_wider_than_one_pass():
    """The one-pass answer holds a whole row in registers: wider rows are a clear error."""
    from examples.norms.launch import FWD_MAX_FUSED_COLS

    n = FWD_MAX_FUSED_COLS + 1
    x, r = random_tensor((1, n)), random_tensor((1, n))
    with pytest.raises(ValueError, match=f"at most {FWD_MAX_FUSED_COLS}"):
        add_layer_norm(x, r, random_tensor(n), random_tensor(n))


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (
            add_layer_norm,
            lambda: (random_tensor((3, 8)), _grad(random_tensor((3, 8))), random_tensor(8), random_tensor(8)),
        ),
        (welford_row_stats, lambda: (_grad(random_tensor((3, 8))),)),
    ],
    ids=["add_layer_norm", "welford_row_stats"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
