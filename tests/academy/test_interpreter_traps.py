"""Pin the Triton-interpreter behaviours the handbook warns about.

If a Triton release fixes one of these, its test fails: update the warning in
docs/contributing.md and drop the workaround, then delete the test.
"""

from academy import INTERPRETED

import pytest
import torch
import triton
import triton.language as tl

pytestmark = pytest.mark.skipif(not INTERPRETED, reason="interpreter behaviour only")


@triton.jit
def _round_to_bf16(x_ptr, out_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets).to(tl.bfloat16))


@triton.jit
def _add_in_bf16(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))


def test_fp32_to_bf16_truncates_instead_of_rounding():
    x = torch.tensor([1 + 3 / 512, -(1 + 3 / 512), 1.0, 2.0])  # halfway-plus cases round up in IEEE
    out = torch.empty(4, dtype=torch.bfloat16)
    _round_to_bf16[(1,)](x, out, N=4)
    assert out[0].item() == 1.0 and x.bfloat16()[0].item() == 1.0078125


def test_bf16_arithmetic_is_wrong():
    x, y = torch.randn(8).bfloat16(), torch.randn(8).bfloat16()
    out = torch.empty(8, dtype=torch.bfloat16)
    _add_in_bf16[(1,)](x, y, out, N=8)
    assert not torch.allclose(out.float(), (x + y).float(), rtol=1e-2, atol=1e-2)
