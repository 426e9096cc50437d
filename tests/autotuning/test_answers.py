"""The exercise answers of the autotuning tutorial (examples/autotuning/answers.py), against float64 PyTorch."""

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.autotuning import answers
from examples.autotuning.answers import configs_that_fit, matmul_bucketed, matmul_bucketed_kernel, shared_memory_bytes
from examples.autotuning.autotune import _config, configs_for


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, answers)


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
    assert shared_memory_bytes(_config(128, 256, 64, 8, 3), torch.float16) == 3 * (128 * 64 + 64 * 256) * 2
    assert shared_memory_bytes(_config(64, 64, 32, 4, 5), torch.float32) == 5 * (64 * 32 + 32 * 64) * 4
    fits = configs_that_fit(configs_for(False), torch.float32, 100 * 1024)
    assert fits and all(shared_memory_bytes(c, torch.float32) <= 100 * 1024 for c in fits)
    assert len(fits) < len(configs_for(False))
