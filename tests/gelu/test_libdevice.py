"""Exact GeLU with libdevice's erf: against float64 PyTorch, at extreme values, under the
interpreter (which cannot call libdevice) and compiled for an H100, with or without a GPU."""

import math
import re

from academy import DEVICE, INTERPRETED
from academy.testing import (
    FLOAT_DTYPES,
    assert_close,
    cancellation_tolerance,
    poison_allocations,
    random_tensor,
)

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice

from examples.gelu import libdevice_erf
from examples.gelu.kernel import BLOCK_SIZE, NUM_WARPS, RSQRT_2
from examples.gelu.libdevice_erf import (
    USE_LIBDEVICE,
    compile_for_h100,
    gelu_erf_libdevice,
    gelu_erf_libdevice_kernel,
    ptx_instructions,
)


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, libdevice_erf)


def _tolerance(x, dtype):
    """The dtype's bar plus the fp32 bar times ‖terms‖/‖result‖ − 1: for negative x, 1 + erf(x/√2)
    cancels, so the fp32 roundings are relative to ½|x|(1 + |erf|), not to GeLU(x) (see test_kernel.py)."""
    x = x.double()
    e = torch.erf(x / math.sqrt(2))
    return cancellation_tolerance(dtype, 0.5 * x.abs() * (1 + e.abs()), 0.5 * x * (1 + e))


@pytest.mark.parametrize("n", (1, 127, 1025, BLOCK_SIZE + 3))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_matches_float64(n, dtype):
    x = random_tensor(n, dtype, scale=3.0)
    out = gelu_erf_libdevice(x)
    assert out.dtype == dtype and out.shape == x.shape
    expected = F.gelu(x.double(), approximate="none")
    baseline = F.gelu(x, approximate="none")  # PyTorch in the same precision
    assert_close(out, expected, tol=_tolerance(x, dtype), baseline=baseline, name="gelu_erf_libdevice")


def test_any_rank_and_the_interpreters_branch():
    x = random_tensor((3, 5, 67), scale=2.0)
    assert_close(gelu_erf_libdevice(x), F.gelu(x.double()), dtype=torch.float32)
    assert USE_LIBDEVICE == (not INTERPRETED)


# numpy, under the interpreter, warns on the −∞·0 that is meant to give NaN here
@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
def test_extreme_values_match_pytorch(dtype):
    """Large |x| saturates erf to ±1 in fp32: GeLU(x) is x, or a zero. At −∞ both PyTorch and
    the kernel compute −∞·(1 + (−1)) = −∞·0, which IEEE arithmetic makes NaN; NaN propagates."""
    finite = [-1e4, -3000.0, -60.0, -12.0, -0.0, 0.0, 12.0, 60.0, 3000.0, 1e4]
    if dtype == torch.float16:  # 65504 is fp16's largest value; 1e4 and 3000 are inside it
        finite = [v for v in finite if abs(v) <= 6e4]
    x = torch.tensor([-math.inf, *finite, math.inf, math.nan], device=DEVICE).to(dtype)
    out = gelu_erf_libdevice(x)
    expected = F.gelu(x.float(), approximate="none").to(dtype)
    assert torch.equal(out.isnan(), expected.isnan()), (out, expected)
    assert out[0].isnan() and out[-1].isnan() and out[-2].item() == math.inf
    keep = ~expected.isnan()
    assert torch.equal(out[keep], expected[keep]), (out, expected)
    big = x.isfinite() & (x.abs() >= 12)
    assert torch.equal(out[big & (x > 0)], x[big & (x > 0)])
    assert (out[big & (x < 0)] == 0).all()


def test_bad_input_is_refused_like_gelu():
    with pytest.raises(TypeError, match="supported"):
        gelu_erf_libdevice(random_tensor(10, torch.float64))
    with pytest.raises(ValueError, match="forward only"):
        gelu_erf_libdevice(random_tensor(10, requires_grad=True))
    assert gelu_erf_libdevice(torch.empty(0, 3, device=DEVICE)).shape == (0, 3)


# ------------------------------------------------------------------ what the interpreter does


@pytest.mark.skipif(not INTERPRETED, reason="interpreter behaviour only")
def test_interpreter_cannot_run_the_libdevice_branch():
    """libdevice's functions are stubs (their body is ``...``) that the compiler swaps for the
    backend's library; the interpreter makes no swap, so the stub returns None and the next
    operation fails. If a Triton release teaches the interpreter libdevice, this test fails:
    then the launcher's switch and the tutorial's section can go."""
    assert libdevice.erf.__module__ == "triton.language.extra.libdevice"
    x = random_tensor(100)
    y = torch.full_like(x, math.nan)
    with pytest.raises(Exception, match="None"):
        gelu_erf_libdevice_kernel[(1,)](x, y, x.numel(), USE_LIBDEVICE=True, BLOCK_SIZE=128)
    assert y.isnan().all()  # nothing was stored


@triton.jit
def _erf_from_cuda_libdevice(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, cuda_libdevice.erf(tl.load(x_ptr + offsets)))


@pytest.mark.skipif(not INTERPRETED, reason="interpreter behaviour only")
def test_interpreter_cannot_call_cuda_libdevice_by_name_either():
    """The interpreter sets up only tl's own functions; its builder has no extern calls at all."""
    from triton.runtime.interpreter import InterpreterBuilder

    x = random_tensor(16)
    with pytest.raises(Exception, match="_semantic"):
        _erf_from_cuda_libdevice[(1,)](x, torch.empty_like(x), N=16)
    with pytest.raises(NotImplementedError, match="extern_elementwise not supported"):
        InterpreterBuilder().create_extern_elementwise("", "", "__nv_erff", [], None, True)


@pytest.mark.skipif(not INTERPRETED, reason="interpreter behaviour only")
def test_interpreter_erf_is_pythons_math_erf_rounded_to_fp32():
    """The interpreter evaluates tl.math.erf with Python's math.erf (double precision) on each
    element, rounded to fp32: the kernel's output is that, bit for bit."""
    x = random_tensor(300, scale=3.0)
    z = x * torch.tensor(RSQRT_2.value, dtype=torch.float32)  # fp32, as in the kernel
    e = torch.tensor([math.erf(v) for v in z.tolist()], dtype=torch.float64).float()
    expected = 0.5 * x * (1.0 + e)
    assert torch.equal(gelu_erf_libdevice(x), expected)


# ------------------------------------------------------------------ the compiled path


def test_both_branches_compile_to_the_same_ptx_for_an_h100():
    """libdevice.erf is an extern call to __nv_erff; tl.math.erf is MLIR's math.erf, which the
    NVIDIA backend also lowers to __nv_erff. After libdevice is linked in, the PTX is the same."""
    with_libdevice, with_math = compile_for_h100(True), compile_for_h100(False)
    assert re.search(r"tt\.extern_elementwise .*symbol = \"__nv_erff\"", with_libdevice["ttir"])
    assert "math.erf" in with_math["ttir"] and "__nv_erff" not in with_math["ttir"]
    assert "__nv_erff" in with_math["llir"]  # the lowering of math.erf, inlined from libdevice
    code = ptx_instructions(with_libdevice["ptx"])
    assert code == ptx_instructions(with_math["ptx"])
    assert not any(line.startswith("call") for line in code)  # erf is inlined: no function call left


def test_the_portable_import_becomes_cuda_libdevice_on_nvidia():
    """``triton.language.extra.libdevice`` is a module of stubs; the NVIDIA backend maps it to
    ``triton.language.extra.cuda.libdevice``. tl.math has erf but no tanh; libdevice has both."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend

    assert CUDABackend(GPUTarget("cuda", 90, 32)).get_module_map() == {libdevice.__name__: cuda_libdevice}
    assert hasattr(tl.math, "erf") and not hasattr(tl.math, "tanh")
    for name in ("erf", "tanh", "erfinv", "erfcx", "lgamma"):
        assert callable(getattr(libdevice, name))


@pytest.mark.skipif(DEVICE != "cuda", reason="GPU only: the interpreter cannot call libdevice")
def test_on_the_gpu_libdevice_and_tl_math_erf_give_the_same_bits():
    """The compiled kernel really calls libdevice (its TTIR names __nv_erff), is as accurate as
    PyTorch's exact GeLU, and gives the same bits as the tl.math.erf branch (same PTX, above)."""
    x = random_tensor(3 * BLOCK_SIZE + 5, scale=4.0)
    outs, ttir = {}, {}
    for use in (True, False):
        y = torch.full_like(x, math.nan)
        compiled = gelu_erf_libdevice_kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](
            x, y, x.numel(), USE_LIBDEVICE=use, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS
        )
        outs[use], ttir[use] = y, compiled.asm["ttir"]
    assert '"__nv_erff"' in ttir[True] and "__nv_erff" not in ttir[False]
    assert torch.equal(outs[True], outs[False])
    assert_close(outs[True], F.gelu(x.double()), tol=_tolerance(x, torch.float32), name="libdevice erf")
