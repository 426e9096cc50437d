"""The autotuned matmul of tutorial 11: results, the config space, pruning, the EVEN_K heuristic.

(No ``import triton`` before ``academy`` here: on a CPU, Triton's own
``@jit`` helpers such as ``tl.cdiv`` must be defined after ``academy`` has
set ``TRITON_INTERPRET=1``.)

Under the interpreter ``CONFIGS`` is one config, so nothing is timed; the
pruning rules and the GPU config list are plain Python and tested everywhere.
"""

from academy import INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.autotuning import autotune
from examples.autotuning.autotune import (
    CONFIGS,
    SHARED_MEMORY_BUDGET,
    _config,
    configs_for,
    even_k,
    matmul_autotuned,
    matmul_autotuned_kernel,
    prune_configs,
)
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
    poison_allocations(monkeypatch, autotune)


@pytest.mark.parametrize("shape", [(5, 7, 3), (40, 33, 64), (70, 50, 70)], ids=str)  # K = 64 takes the EVEN_K path
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", [None, "leaky_relu"])
def test_matches_float64(shape, dtype, activation):
    M, N, K = shape
    a = random_tensor((M, K), dtype)
    b = random_tensor((N, K), dtype).t()  # transposed operand
    c = matmul_autotuned(a, b, activation)
    expected = apply_activation(a.double() @ b.double(), activation)
    assert_close(c, expected, dtype=dtype, baseline=apply_activation(a.float() @ b.float(), activation).to(dtype))


def test_the_interpreter_gets_one_config_and_the_gpu_several():
    assert len(configs_for(True)) == 1
    gpu = configs_for(False)
    assert len(gpu) >= 4
    assert len({str(c) for c in gpu}) == len(gpu), "no duplicate configs"
    for config in gpu:
        assert {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M"} <= set(config.kwargs)
        assert all(config.kwargs[k] >= 16 for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    assert CONFIGS == configs_for(INTERPRETED)
    assert matmul_autotuned_kernel.keys == ["M", "N", "K"]


def test_even_k_heuristic():
    assert even_k({"K": 128, "BLOCK_K": 64}) is True
    assert even_k({"K": 70, "BLOCK_K": 32}) is False


def _args(M, N, dtype=torch.float16):
    return {"M": M, "N": N, "K": 4096, "a_ptr": torch.empty(0, dtype=dtype)}


def test_pruning_drops_tiles_larger_than_the_matrix():
    kept = prune_configs(configs_for(False), _args(40, 4096))
    assert kept and all(c.kwargs["BLOCK_M"] <= 64 for c in kept)
    big = prune_configs(configs_for(False), _args(8192, 8192))
    assert any(c.kwargs["BLOCK_M"] == 256 for c in big)


def test_pruning_respects_shared_memory():
    for dtype in (torch.float16, torch.float32):
        size = torch.empty(0, dtype=dtype).element_size()
        for c in prune_configs(configs_for(False), _args(8192, 8192, dtype)):
            bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
            assert c.num_stages * (bm * bk + bk * bn) * size <= SHARED_MEMORY_BUDGET
    fp32_kept = prune_configs(configs_for(False), _args(8192, 8192, torch.float32))
    assert len(fp32_kept) < len(configs_for(False)), "fp32 tiles weigh twice as much: some must go"


def test_pruning_never_returns_nothing():
    tiny = [_config(256, 256, 128, 8, 8)]  # too big for anything: kept anyway
    assert prune_configs(tiny, _args(16, 16)) == tiny
