"""The exercise answers of the kernel chapters, against PyTorch on fresh random inputs.

Under the interpreter bf16 stores truncate instead of rounding, so bf16
results are held to "no worse than twice PyTorch's own bf16 error" against a
float64 reference (``assert_close(..., baseline=...)``), never to equality.
"""

import math

import pytest
import torch

from academy import DEVICE
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor
from examples.fused_softmax import exercises as softmax_exercises
from examples.fused_softmax.exercises import log_softmax, softmax_with_temperature
from examples.vector_add import exercises as add_exercises
from examples.vector_add.exercises import add_2d, axpy


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, add_exercises)
    poison_allocations(monkeypatch, softmax_exercises)


# ---------------------------------------------------------------- vector add: axpy


@pytest.mark.parametrize("n", [1, 127, 3001])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_axpy_matches_torch(n, dtype):
    a = -1.75
    x, y = random_tensor(n, dtype), random_tensor(n, dtype)
    expected = a * x.double() + y.double()
    assert_close(axpy(a, x, y), expected, dtype=dtype, baseline=torch.add(y, x, alpha=a), name="axpy")


def test_axpy_strided_and_multidimensional():
    x, y = random_tensor(2001)[::2], random_tensor(3003)[1::3]
    assert_close(axpy(0.5, x, y), 0.5 * x + y)
    x, y = random_tensor((3, 17, 5)), random_tensor((3, 17, 5))
    assert_close(axpy(3, x, y), 3 * x + y)


def test_axpy_rejects_bad_input():
    with pytest.raises(TypeError, match="Python number"):
        axpy(torch.tensor(2.0), random_tensor(4), random_tensor(4))
    with pytest.raises(ValueError, match="shapes differ"):
        axpy(1.0, random_tensor(4), random_tensor(5))


# ---------------------------------------------------------------- vector add: 2-D strided


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_add_2d_any_strides(dtype):
    x = random_tensor((49, 45), dtype).t()  # column-major: strides (1, 45)
    y = random_tensor((90, 150), dtype)[::2, 3::3]  # strides (300, 3), offset start
    assert x.shape == y.shape == (45, 49)
    out = add_2d(x, y)
    assert out.is_contiguous()
    expected = x.double() + y.double()
    assert_close(out, expected, dtype=dtype, baseline=x + y, name="add_2d")


def test_add_2d_irregular_tiles():
    x, y = random_tensor((33, 65)), random_tensor((33, 65))
    assert_close(add_2d(x, y, block_m=16, block_n=32), x + y)
    empty = torch.empty((0, 7), device=DEVICE)
    assert add_2d(empty, empty).shape == (0, 7)


def test_add_2d_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        add_2d(random_tensor(8), random_tensor(8))
    with pytest.raises(ValueError, match="shapes differ"):
        add_2d(random_tensor((3, 4)), random_tensor((4, 3)))


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


@pytest.mark.parametrize("temperature, error", [(0.0, ValueError), (-1.0, ValueError), (math.inf, ValueError), ("1", TypeError)])
def test_temperature_rejects_bad_values(temperature, error):
    with pytest.raises(error, match="temperature"):
        softmax_with_temperature(random_tensor((2, 8)), temperature)
