"""The matmul chapter's exercise answers against float64 PyTorch."""

from academy.testing import assert_close, random_tensor

import numpy as np
import pytest
import torch

from examples.matmul.exercises import matmul_backward, matmul_split_k_atomic


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_matmul_backward_matches_autograd(dtype):
    a = random_tensor((37, 72), dtype, requires_grad=True)
    b = random_tensor((72, 40), dtype, requires_grad=True)
    grad_c = random_tensor((37, 40), dtype)
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    (a64 @ b64).backward(grad_c.double())
    grad_a, grad_b = matmul_backward(a.detach(), b.detach(), grad_c)
    assert_close(grad_a, a64.grad, dtype=dtype, name="grad_a")
    assert_close(grad_b, b64.grad, dtype=dtype, name="grad_b")


def test_matmul_backward_checks_the_gradient_shape():
    with pytest.raises(ValueError, match="grad_c"):
        matmul_backward(random_tensor((4, 8)), random_tensor((8, 5)), random_tensor((5, 4)))


@pytest.mark.parametrize("split_k", [1, 3, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_split_k_atomic(split_k, dtype):
    a, b = random_tensor((5, 300), dtype), random_tensor((300, 40), dtype)
    assert_close(matmul_split_k_atomic(a, b, split_k), a.double() @ b.double(), dtype=dtype)


def test_split_k_atomic_rejects_a_bad_split():
    with pytest.raises(ValueError, match="split_k"):
        matmul_split_k_atomic(random_tensor((4, 8)), random_tensor((8, 5)), 0)


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (matmul_split_k_atomic, lambda: (_grad(random_tensor((4, 16))), random_tensor((16, 8)))),
    ],
    ids=["matmul_split_k_atomic"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())


def test_split_k_atomic_takes_a_numpy_split():
    a, b = random_tensor((8, 64)), random_tensor((64, 8))
    assert_close(matmul_split_k_atomic(a, b, np.int64(2)), a.double() @ b.double(), dtype=torch.float32)
