"""Every stage of the chapter computes the same ``act(a @ b)`` (float64 PyTorch as the judge)."""

from academy.testing import assert_close, random_tensor

import pytest
import torch

from examples.matmul.kernel import apply_activation
from examples.matmul.stages import STAGES

TUTORIAL = {"k_loop", "grouped"}  # the tiling tutorial's kernel: no gelu epilogue


@pytest.mark.parametrize("name", list(STAGES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_stage_matches_float64(name, dtype):
    a, b = random_tensor((45, 264), dtype), random_tensor((264, 40), dtype)
    activation = "relu" if name in TUTORIAL else "gelu"
    out = STAGES[name](a, b, activation)
    assert_close(out, apply_activation(a.double() @ b.double(), activation), dtype=dtype, name=name)


@pytest.mark.parametrize("name", list(STAGES))
def test_stage_takes_column_major_weights(name):
    a, w = random_tensor((33, 96), torch.float16), random_tensor((40, 96), torch.float16)
    assert_close(STAGES[name](a, w.T), a.double() @ w.double().T, dtype=torch.float16, name=name)


def test_tutorial_stages_refuse_gelu():
    with pytest.raises(ValueError, match="gelu"):
        STAGES["k_loop"](random_tensor((16, 16)), random_tensor((16, 16)), "gelu")


def test_stages_are_in_chapter_order():
    assert list(STAGES) == ["naive", "k_loop", "grouped", "autotuned", "pipelined", "persistent", "split_k"]
