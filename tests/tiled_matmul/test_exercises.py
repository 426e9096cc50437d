"""The exercise answers of the tiling tutorial, against float64 PyTorch.

The autotuning tutorial's answers are tested in ``tests/autotuning/test_answers.py``.
"""

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.tiled_matmul import exercises
from examples.tiled_matmul.exercises import batched_matmul, linear_bias_act
from examples.tiled_matmul.kernel import apply_activation

DTYPES = [
    torch.float32,
    torch.float16,
    pytest.param(
        torch.bfloat16, marks=pytest.mark.skipif(INTERPRETED, reason="bf16 tl.dot is wrong under the interpreter")
    ),
]


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, exercises)


@pytest.mark.parametrize("activation", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_bias_act(activation, dtype):
    x, w, bias = random_tensor((37, 45), dtype), random_tensor((45, 50), dtype), random_tensor(50, dtype)
    expected = apply_activation(x.double() @ w.double() + bias.double(), activation)
    baseline = apply_activation(x.float() @ w.float() + bias.float(), activation).to(dtype)
    assert_close(linear_bias_act(x, w, bias, activation), expected, dtype=dtype, baseline=baseline)


def test_linear_bias_act_rejects_a_wrong_bias():
    with pytest.raises(ValueError, match="bias must have shape"):
        linear_bias_act(random_tensor((4, 5)), random_tensor((5, 6)), random_tensor(5))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batched_matmul(dtype):
    a = random_tensor((3, 33, 40), dtype)
    b = random_tensor((3, 36, 40), dtype).transpose(1, 2)  # (3, 40, 36), non-contiguous
    expected = a.double() @ b.double()
    assert_close(batched_matmul(a, b), expected, dtype=dtype, baseline=(a.float() @ b.float()).to(dtype))


def test_batched_matmul_rejects_mismatched_batches():
    with pytest.raises(ValueError, match="expected a"):
        batched_matmul(random_tensor((2, 4, 5)), random_tensor((3, 5, 6)))


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (linear_bias_act, lambda: (random_tensor((4, 16)), random_tensor((16, 8)), _grad(random_tensor(8)))),
        (batched_matmul, lambda: (_grad(random_tensor((2, 4, 16))), random_tensor((2, 16, 8)))),
    ],
    ids=["linear_bias_act", "batched_matmul"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
