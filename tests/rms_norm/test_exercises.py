"""The RMS-norm exercise answers, against PyTorch on fresh random inputs."""

from academy import INTERPRETED
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch
import torch.nn.functional as F

from examples.rms_norm import exercises
from examples.rms_norm.exercises import add_rms_norm, rms_norm_offset


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 1000)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rms_norm_offset(shape, dtype):
    n = shape[-1]
    x, w = random_tensor(shape, dtype), random_tensor(n, dtype, scale=0.1)
    expected = F.rms_norm(x.double(), (n,), 1.0 + w.double(), 1e-6)
    baseline = F.rms_norm(x, (n,), 1.0 + w, 1e-6)
    assert_close(rms_norm_offset(x, w), expected, dtype=dtype, baseline=baseline, name="y")


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 1000)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_add_rms_norm(shape, dtype):
    if dtype == torch.bfloat16 and INTERPRETED:
        pytest.skip("bf16 rounding of h is truncation under the interpreter")
    n = shape[-1]
    x, r, w = random_tensor(shape, dtype), random_tensor(shape, dtype), random_tensor(n, dtype, offset=1.0)
    y, h = add_rms_norm(x, r, w)
    assert torch.equal(h, x + r)
    expected = F.rms_norm((x + r).double(), (n,), w.double(), 1e-6)
    assert_close(y, expected, dtype=dtype, baseline=F.rms_norm(x + r, (n,), w, 1e-6), name="y")


def test_add_rms_norm_rejects_mismatched_residual():
    with pytest.raises(ValueError, match="shapes differ"):
        add_rms_norm(random_tensor((3, 8)), random_tensor((3, 9)), random_tensor(8))


@pytest.mark.parametrize("op", ["offset", "add"])
def test_one_pass_answers_reject_rows_wider_than_one_pass(op):
    """Both answers hold a whole row in registers: wider rows are a clear error."""
    from examples.norms.launch import FWD_MAX_FUSED_COLS

    n = FWD_MAX_FUSED_COLS + 1
    x, w = random_tensor((1, n)), random_tensor(n)
    with pytest.raises(ValueError, match=f"at most {FWD_MAX_FUSED_COLS}"):
        rms_norm_offset(x, w) if op == "offset" else add_rms_norm(x, random_tensor((1, n)), w)


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (rms_norm_offset, lambda: (_grad(random_tensor((3, 8))), random_tensor(8))),
        (add_rms_norm, lambda: (random_tensor((3, 8)), random_tensor((3, 8)), _grad(random_tensor(8)))),
    ],
    ids=["rms_norm_offset", "add_rms_norm"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
