"""The softmax chapter's exercise answers, against PyTorch on fresh random inputs.

Under the interpreter bf16 stores truncate instead of rounding, so bf16
results are held to "no worse than twice PyTorch's own bf16 error" against a
float64 reference (``assert_close(..., baseline=...)``), never to equality.
"""

import math

from academy import DEVICE
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.fused_softmax import exercises as softmax_exercises
from examples.fused_softmax.exercises import log_softmax, softmax_with_temperature


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, softmax_exercises)


# ---------------------------------------------------------------- softmax: log_softmax

SHAPES = [(1, 1), (5, 127), (3, 2, 1000), (4, 3001)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_log_softmax_matches_torch(shape, dtype):
    x = random_tensor(shape, dtype, scale=3.0)
    expected = torch.log_softmax(x.double(), dim=-1)
    baseline = torch.log_softmax(x, dim=-1)
    out = log_softmax(x)
    assert out.dtype == dtype
    if shape[-1] == 1:  # log_softmax of one value is exactly 0
        assert torch.equal(out, torch.zeros_like(out))
        return
    assert_close(out, expected, dtype=dtype, baseline=baseline, name="log_softmax")


def test_log_softmax_has_no_log_of_zero():
    """exp(−200) underflows to 0 in fp32, so log(softmax(x)) is −inf there; the fused form is finite."""
    x = random_tensor((3, 50))
    x[:, 0] = 200.0
    out = log_softmax(x)
    assert torch.isinf(torch.log(torch.softmax(x, dim=-1))).any()
    assert torch.isfinite(out).all()
    assert_close(out, torch.log_softmax(x.double(), dim=-1), dtype=torch.float32)


def test_log_softmax_strided_rows_and_width_limit():
    x = random_tensor((20, 300))[::3, 7:207]
    assert_close(log_softmax(x), torch.log_softmax(x, dim=-1), dtype=torch.float32)
    too_wide = random_tensor((1, softmax_exercises.MAX_FUSED_COLS + 1))
    with pytest.raises(ValueError, match="at most"):
        log_softmax(too_wide)


# ---------------------------------------------------------------- softmax: temperature


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_temperature_matches_torch(temperature, dtype):
    x = random_tensor((6, 257), dtype, scale=2.0)
    expected = torch.softmax(x.double() / temperature, dim=-1)
    baseline = torch.softmax(x.float() / temperature, dim=-1).to(dtype)
    out = softmax_with_temperature(x, temperature)
    assert out.dtype == dtype
    assert_close(out, expected, dtype=dtype, baseline=baseline, name="softmax(x / t)")


def test_temperature_keeps_masked_entries_at_zero():
    x = random_tensor((4, 90))
    x[1, ::3] = -math.inf
    out = softmax_with_temperature(x, 0.7)
    assert torch.equal(out[1, ::3], torch.zeros(30, device=DEVICE))
    assert_close(out, torch.softmax(x.double() / 0.7, dim=-1), dtype=torch.float32)


@pytest.mark.parametrize(
    "temperature, error", [(0.0, ValueError), (-1.0, ValueError), (math.inf, ValueError), ("1", TypeError)]
)
def test_temperature_rejects_bad_values(temperature, error):
    with pytest.raises(error, match="temperature"):
        softmax_with_temperature(random_tensor((2, 8)), temperature)


def test_temperature_accepts_numpy_scalars():
    x = random_tensor((3, 50), scale=2.0)
    for t in (np.float32(0.5), np.float64(2.0), np.int64(3)):
        assert_close(softmax_with_temperature(x, t), torch.softmax(x.double() / float(t), -1), dtype=torch.float32)
