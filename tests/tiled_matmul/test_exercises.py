"""The exercise answers of the tiling and autotuning tutorials, against float64 PyTorch."""

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.tiled_matmul import exercises
from examples.tiled_matmul.exercises import batched_matmul, linear_bias_act, matmul_bucketed, matmul_bucketed_kernel
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


@pytest.mark.parametrize("M", [20, 30, 32])
def test_matmul_bucketed(M):
    a, b = random_tensor((M, 40), torch.float16), random_tensor((40, 24), torch.float16)
    assert_close(matmul_bucketed(a, b), a.double() @ b.double(), dtype=torch.float16)


@pytest.mark.skipif(INTERPRETED, reason="one config under the interpreter: nothing is tuned or cached")
def test_bucketed_rows_share_one_tuning():
    b = random_tensor((64, 48), torch.float16)
    for M in (1000, 1010, 1024):
        matmul_bucketed(random_tensor((M, 64), torch.float16), b)
    keys = [k for k in matmul_bucketed_kernel.cache if k[:3] == (1024, 48, 64)]
    assert len(keys) == 1


def test_shared_memory_bytes():
    from examples.tiled_matmul.autotune import _config, configs_for
    from examples.tiled_matmul.exercises import configs_that_fit, shared_memory_bytes

    assert shared_memory_bytes(_config(128, 256, 64, 8, 3), torch.float16) == 3 * (128 * 64 + 64 * 256) * 2
    assert shared_memory_bytes(_config(64, 64, 32, 4, 5), torch.float32) == 5 * (64 * 32 + 32 * 64) * 4
    fits = configs_that_fit(configs_for(False), torch.float32, 100 * 1024)
    assert fits and all(shared_memory_bytes(c, torch.float32) <= 100 * 1024 for c in fits)
    assert len(fits) < len(configs_for(False))
