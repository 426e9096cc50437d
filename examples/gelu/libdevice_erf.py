"""Exact GeLU with ``erf`` taken from libdevice, NVIDIA's library of CUDA math functions.

``gelu_erf_libdevice(x)`` equals ``torch.nn.functional.gelu(x, approximate="none")``
for fp32, fp16 and bf16 tensors. On a GPU its kernel calls ``libdevice.erf``, an
extern function that Triton links into the kernel as bitcode. Triton's CPU
interpreter cannot run such a call, so there the launcher compiles the other
branch of the same kernel, ``tl.math.erf``, which the interpreter evaluates with
Python's ``math.erf``.

The portable import is ``from triton.language.extra import libdevice`` (Triton
3.6 and newer): a module of stubs that each backend's compiler replaces with its
own library, CUDA's on NVIDIA and the HIP one on AMD.
``triton.language.extra.cuda.libdevice`` names NVIDIA's directly, and would tie
the kernel to one vendor.

``tests/gelu/test_libdevice.py`` checks it against float64 PyTorch, pins what
the interpreter does with the libdevice branch, and compiles both branches for
an H100 (sm_90) without a GPU.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

from academy import INTERPRETED
from academy.validation import check_forward_only

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from examples.gelu.kernel import BLOCK_SIZE, NUM_WARPS, RSQRT_2, check_inputs


# --8<-- [start:libdevice_kernel]
@triton.jit
def gelu_erf_libdevice_kernel(
    x_ptr,
    y_ptr,
    n_elements,
    USE_LIBDEVICE: tl.constexpr,  # True on a GPU; False under the interpreter
    BLOCK_SIZE: tl.constexpr,
):
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)  # (1)!
    z = x * RSQRT_2
    if USE_LIBDEVICE:  # (2)!
        e = libdevice.erf(z)  # (3)!
    else:
        e = tl.math.erf(z)  # (4)!
    y = 0.5 * x * (1.0 + e)  # (5)!
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:libdevice_kernel]


# --8<-- [start:libdevice_launcher]
USE_LIBDEVICE = not INTERPRETED  # (1)!


def gelu_erf_libdevice(x: torch.Tensor) -> torch.Tensor:
    """Exact GeLU, ``½x(1 + erf(x/√2))``, with libdevice's ``erf`` on a GPU; forward only."""
    check_inputs(x, "none")
    check_forward_only("gelu_erf_libdevice", x=x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE),)
        gelu_erf_libdevice_kernel[grid](
            x, y, x.numel(), USE_LIBDEVICE=USE_LIBDEVICE, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS
        )
    return y


# --8<-- [end:libdevice_launcher]


REPO_ROOT = Path(__file__).resolve().parents[2]

SIGNATURE = {
    "x_ptr": "*fp32",
    "y_ptr": "*fp32",
    "n_elements": "i32",
    "USE_LIBDEVICE": "constexpr",
    "BLOCK_SIZE": "constexpr",
}


COMPILED_STAGES = ("ttir", "ttgir", "llir", "ptx")


def compile_for_h100(use_libdevice: bool) -> dict[str, str]:
    """Compile one branch of the kernel for fp32 on an H100 (sm_90), without a GPU:
    Triton's compiler and its bundled ``ptxas`` run on any Linux machine. Returns the text
    of each stage, keyed by ``COMPILED_STAGES``: Triton's IR, its GPU IR, LLVM IR and PTX.

    The compile runs in a fresh Python process. Triton's interpreter patches
    ``triton.language`` while it runs a kernel, and (as of Triton 3.9) leaves
    ``triton.language.core`` patched once a kernel has called one of the language's own
    ``@triton.jit`` functions, such as the ``tl.sigmoid`` in ``gelu``'s tanh; after that, a
    compile in the same process fails (``tests/academy/test_interpreter_traps.py``)."""
    command = f"from examples.gelu.libdevice_erf import _print_stages; _print_stages({use_libdevice!r})"
    run = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    if run.returncode != 0:
        raise RuntimeError(f"compiling for sm_90 failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def _print_stages(use_libdevice: bool) -> None:
    """The body of ``compile_for_h100``'s process: compile, print the stages as one JSON line."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    kernel = gelu_erf_libdevice_kernel
    fn = kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn)  # the interpreter wraps it
    source = ASTSource(fn, SIGNATURE, constexprs={"USE_LIBDEVICE": use_libdevice, "BLOCK_SIZE": BLOCK_SIZE})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a newer Triton's note on its FP-fusion default
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": NUM_WARPS})
    print(json.dumps({stage: compiled.asm[stage] for stage in COMPILED_STAGES}))


_NOT_CODE = re.compile(r"^\s*(\.loc|\.file|//|\$L__tmp\d+:)")


def ptx_instructions(ptx: str) -> list[str]:
    """The kernel's PTX without its debug sections, line records, comments and debug labels."""
    body = ptx.split(".section")[0]
    return [line.strip() for line in body.splitlines() if line.strip() and not _NOT_CODE.match(line)]


if __name__ == "__main__":
    from academy import DEVICE

    import torch.nn.functional as F

    x = torch.randn(3, 1001, device=DEVICE) * 4
    expected = F.gelu(x.double(), approximate="none")
    error = ((gelu_erf_libdevice(x) - expected).norm() / expected.norm()).item()
    where = "libdevice.erf" if USE_LIBDEVICE else "tl.math.erf (interpreter)"
    print(f"gelu_erf_libdevice on {DEVICE}, 3×1001, erf from {where}: relative L2 error {error:.1e}")
    assert error < 1e-5
