"""vector_add: add(x, y) against PyTorch on fresh random inputs."""

from academy import DEVICE
from academy.testing import IRREGULAR_SIZES, assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.vector_add import kernel
from examples.vector_add.kernel import BLOCK_SIZE, add, reference


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


@pytest.mark.parametrize("n", IRREGULAR_SIZES + (BLOCK_SIZE, 3 * BLOCK_SIZE + 1))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_reference(n, dtype):
    x, y = random_tensor(n, dtype), random_tensor(n, dtype)
    assert_close(add(x, y), reference(x, y))


def test_any_rank_when_contiguous():
    x, y = random_tensor((3, 50, 7)), random_tensor((3, 50, 7))
    assert_close(add(x, y), x + y)


def test_strided_vectors():
    base_x, base_y = random_tensor(3001), random_tensor(3002)
    x, y = base_x[::3], base_y[1::3]  # strides 3 and 3, different offsets
    out = add(x, y)
    assert out.is_contiguous()
    assert_close(out, x + y)


def test_empty_returns_empty():
    out = add(torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE))
    assert out.shape == (0,)


@pytest.mark.parametrize(
    "x, y, error, message",
    [
        (lambda: random_tensor(10), lambda: random_tensor(11), ValueError, "shapes differ"),
        (lambda: random_tensor(10), lambda: random_tensor(10, torch.float16), TypeError, "dtypes differ"),
        (lambda: random_tensor(10, torch.float64), lambda: random_tensor(10, torch.float64), TypeError, "supported"),
        (lambda: random_tensor(10, torch.int32), lambda: random_tensor(10, torch.int32), TypeError, "supported"),
        (lambda: random_tensor((8, 8)).t(), lambda: random_tensor((8, 8)), ValueError, "non-contiguous"),
        (lambda: [1.0, 2.0], lambda: random_tensor(2), TypeError, "torch.Tensor"),
    ],
)
def test_bad_input_raises_clear_error(x, y, error, message):
    with pytest.raises(error, match=message):
        add(x(), y())


def test_inputs_that_require_grad_are_refused():
    """add has no backward: its result would carry no gradient, and the graph would be cut silently."""
    x, y = random_tensor(100, requires_grad=True), random_tensor(100)
    with pytest.raises(ValueError, match="add is forward only .* x requires grad"):
        add(x, y)
    with pytest.raises(ValueError, match="y requires grad"):
        add(y, x)
    with torch.no_grad():
        assert_close(add(x, y), x.detach().double() + y.double())


@pytest.mark.skipif(DEVICE != "cuda", reason="a CPU tensor is the right device under the interpreter")
def test_wrong_device_raises():
    with pytest.raises(ValueError, match="kernels run on"):
        add(torch.ones(4), torch.ones(4))


@pytest.mark.skipif(DEVICE != "cuda", reason="needs 2**31 + elements of GPU memory; the interpreter would take hours")
def test_offsets_beyond_int32():
    n = 2**31 + 4096 + 5  # the last blocks start past 2**31: int32 offsets would wrap
    x = torch.ones(n, dtype=torch.float16, device=DEVICE)
    y = torch.full((n,), 2.0, dtype=torch.float16, device=DEVICE)
    out = add(x, y)  # poisoned with NaN first: an unwritten tail fails
    assert (out == 3).all()
