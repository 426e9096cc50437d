"""The vector-add chapter's exercise answers, against PyTorch on fresh random inputs.

Under the interpreter bf16 stores truncate instead of rounding, so bf16
results are held to "no worse than twice PyTorch's own bf16 error" against a
float64 reference (``assert_close(..., baseline=...)``), never to equality.
"""

from academy import DEVICE
from academy.testing import FLOAT_DTYPES, assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.vector_add import exercises as add_exercises
from examples.vector_add.exercises import add_2d, axpy


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, add_exercises)


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
    with pytest.raises(TypeError, match="a must be a real number, got torch.Tensor"):
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


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (axpy, lambda: (2.0, _grad(random_tensor(8)), random_tensor(8))),
        (add_2d, lambda: (random_tensor((3, 4)), _grad(random_tensor((3, 4))))),
    ],
    ids=["axpy", "add_2d"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())


def test_axpy_takes_a_numpy_scale():
    """A NumPy float is a number like any other (it was refused as "not a Python number")."""
    x, y = random_tensor(100), random_tensor(100)
    assert_close(axpy(np.float32(0.5), x, y), 0.5 * x.double() + y.double())
