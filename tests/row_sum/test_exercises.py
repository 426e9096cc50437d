"""The reductions tutorial's exercise answers, against float64 PyTorch on fresh random inputs."""

import math

from academy import DEVICE
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.row_sum import exercises, kernel
from examples.row_sum.exercises import row_max, row_rms

SHAPES = [(1, 1), (4, 63), (3, 1000), (2, 3001)]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.fixture(params=["one tile", "tile loop"])
def tiles(request, monkeypatch):
    if request.param == "tile loop":
        monkeypatch.setattr(kernel, "MAX_BLOCK_N", 64)
    return request.param


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_row_max_is_exact(shape, dtype, tiles):
    """A maximum picks one of the inputs: no rounding at all."""
    x = random_tensor(shape, dtype)
    out = row_max(x)
    assert out.dtype == dtype
    assert torch.equal(out, x.amax(dim=-1))


def test_row_max_of_all_negative_rows(tiles):
    """The masked lanes read −∞: with other=0 a ragged row of negatives would return 0."""
    x = -random_tensor((5, 130)).abs() - 1.0
    assert (row_max(x) < 0).all()
    assert torch.equal(row_max(x), x.amax(dim=-1))


def test_row_max_keeps_infinities(tiles):
    x = random_tensor((3, 200))
    x[1, 150] = math.inf
    x[2, :] = -math.inf
    out = row_max(x)
    assert out[1] == math.inf and out[2] == -math.inf and out[0] == x[0].max()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_row_rms_matches_float64(shape, dtype, tiles):
    x = random_tensor(shape, dtype, scale=2.0, offset=0.3)
    expected = x.double().pow(2).mean(-1).sqrt()
    baseline = x.float().pow(2).mean(-1).sqrt().to(dtype)
    out = row_rms(x)
    assert out.dtype == dtype
    assert_close(out, expected, dtype=dtype, baseline=baseline, name="row rms")


def test_row_rms_does_not_overflow_fp16_squares():
    """300² = 90000 is already past fp16's largest value, 65504: the squares must be taken in fp32."""
    x = torch.full((2, 1000), 300.0, dtype=torch.float16, device=DEVICE)
    assert torch.equal(row_rms(x), torch.full((2,), 300.0, dtype=torch.float16, device=DEVICE))


@pytest.mark.parametrize("op", [row_max, row_rms])
def test_empty_rows_are_rejected(op):
    with pytest.raises(ValueError, match="empty row"):
        op(torch.empty(3, 0, device=DEVICE))
    assert op(torch.empty(0, 4, device=DEVICE)).shape == (0,)


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (row_max, lambda: (_grad(random_tensor((3, 8))),)),
        (row_rms, lambda: (_grad(random_tensor((3, 8))),)),
    ],
    ids=["row_max", "row_rms"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
