"""Pin the Triton-interpreter behaviours the handbook warns about.

If a Triton release fixes one of these, its test fails: update the warning in
docs/contributing.md and drop the workaround, then delete the test.
"""

import json
import os
import subprocess
import sys

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


_COMPILE_AFTER_A_LIBRARY_CALL = """
import json
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction


@triton.jit
def calls_sigmoid(x_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(x_ptr + offsets, tl.sigmoid(tl.load(x_ptr + offsets)))


@triton.jit
def to_fp16(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets).to(tl.float16))


def compiles_for_sm90(n):
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp16", "N": "constexpr"}
    source = ASTSource(JITFunction(to_fp16.fn), signature, constexprs={"N": n})
    try:
        triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        return "compiled"
    except Exception as error:
        return type(error).__name__


before = compiles_for_sm90(16)
calls_sigmoid[(1,)](torch.ones(32), N=32)
print(json.dumps({"before": before, "after": compiles_for_sm90(64)}))
"""


def test_a_kernel_calling_tl_sigmoid_leaves_the_language_patched_for_the_compiler(tmp_path):
    """``tl.sigmoid`` (like ``tl.sum``, ``tl.max`` and the rest of ``triton.language.standard``)
    is itself a ``@triton.jit`` function. Each call patches the builtins of
    ``triton.language.core``, where the launch had patched ``triton.language``, and nothing
    restores them: afterwards a compile in the same process fails whenever the Triton cache
    misses. Compile in a fresh process, as ``examples/gelu/libdevice_erf.compile_for_h100`` does."""
    script = tmp_path / "compile_after_a_library_call.py"
    script.write_text(_COMPILE_AFTER_A_LIBRARY_CALL)
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    outcome = json.loads(run.stdout.splitlines()[-1])
    assert outcome["before"] == "compiled"
    assert outcome["after"] != "compiled", outcome
