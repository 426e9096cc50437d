# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Debugging
#
# A wrong Triton kernel rarely crashes. It returns a tensor, usually of the
# right shape, sometimes right on the sizes you tried. This page shows the
# tools for finding out what a kernel really does, and then the mistakes
# that come up again and again, each one run here so you can see its
# symptom. Every kernel on the page lives in
# `examples/debugging/answers.py` (Triton reads a kernel's source from
# its file); the cells below show its sections and run them.
#
# ## The interpreter: your kernel as NumPy
#
# With `TRITON_INTERPRET=1` set before a kernel is defined (`import academy`
# does it on machines without a GPU), a launch runs each program of the grid
# in turn on the CPU, each `tl.` operation on NumPy arrays. You can `print`
# inside a kernel, set a breakpoint with `pdb`, and run it in CI. What it
# does **not** do:
#
# - detect out-of-bounds loads and stores: they read and write whatever
#   host memory is there (at best garbage, at worst a crash far from the bug);
# - run programs concurrently: races between programs never show;
# - check `tl.device_assert`: it does nothing;
# - apply every GPU compile-time rule (`tl.dot` accepts any shape; see
#   mistake 6), or reproduce GPU rounding exactly (bf16 is off).
#
# So: the interpreter is for logic, the GPU is for the truth.

# %%
import academy  # before anything defines a kernel
from academy.site.notebook import answer, show
from academy.testing import random_tensor

import numpy as np
import torch

from examples.debugging import answers as dbg

print("device:", academy.DEVICE, "| interpreted:", academy.INTERPRETED)


def show_error(call):
    """Run ``call`` and print the exception it raises, message only."""
    try:
        call()
    except Exception as err:
        message = str(err).strip().splitlines()
        print(f"{type(err).__name__}: {message[-1] if message else ''}")
    else:
        print("no error")


# %% [markdown]
# ## Printing, asserting, and catching out-of-bounds accesses
#
# **At compile time.** `tl.static_print(...)` prints while the kernel is
# compiled, and `tl.static_assert(cond, msg)` fails the compilation: both see
# constexprs and types, not data. On a GPU they run once per compilation;
# under the interpreter there is no compilation, so they run in every program.

# %%
show("examples/debugging/answers.py:static_checks")

# %%
x, out = random_tensor(100), torch.empty(100, device=academy.DEVICE)
dbg.static_checks_kernel[(2,)](x, out, 100, BLOCK=64)  # two programs: printed twice here
show_error(lambda: dbg.static_checks_kernel[(1,)](x, out, 100, BLOCK=24))

# %% [markdown]
# **At run time.** `tl.device_print(prefix, value)` prints values from the
# running kernel. On a GPU *every thread* prints (for a scalar, one line per
# thread: hundreds of identical lines), so print from a tiny grid, or from
# one program under an `if pid == 0:`. The interpreter prints once per program:

# %%
show("examples/debugging/answers.py:device_print")

# %%
sums = torch.empty(2, device=academy.DEVICE)
dbg.block_sums_kernel[(2,)](x, sums, 100, BLOCK=64)

# %% [markdown]
# `tl.device_assert(cond, msg)` checks data at run time, but only when the
# kernel is compiled in debug mode (`TRITON_DEBUG=1` in the environment, or
# `@triton.jit(debug=True)`): otherwise it is compiled out. Debug mode also
# adds overflow checks on integer arithmetic. A failed device assert stops
# the kernel and the next CUDA call raises; the CUDA context is then unusable,
# so restart the process.
#
# **compute-sanitizer.** On a GPU, NVIDIA's `compute-sanitizer` runs a
# program with every memory access checked: `compute-sanitizer --tool
# memcheck python my_test.py` reports each out-of-bounds or misaligned
# access with the kernel name and thread; `--tool racecheck` finds shared
# memory races, `--tool initcheck` reads of uninitialised memory. It is slow
# (tens of times), so run it on one small failing case.
#
# **Compiler errors.** A `CompilationError` names the kernel, prints the
# offending source line with a caret under the expression, and ends with the
# reason: read the last line first, then the caret. Several examples follow.
#
# ## The ten most common mistakes
#
# ### 1. A missing mask
#
# The last block runs past the end of the tensor. On a GPU an unmasked
# store writes into whatever follows (another tensor, or an illegal address
# and a crash); under the interpreter it silently corrupts host memory. It
# goes unnoticed when every test size is a multiple of the block.

# %%
show("examples/debugging/answers.py:unmasked_copy")

# %% [markdown]
# To catch it, give the kernel a view of a larger buffer whose tail is
# poisoned (`academy.testing.poisoned`: NaN everywhere), and check afterwards
# that the tail is still NaN. The same trick on the input keeps the stray
# reads inside memory we own.

# %%
show("examples/debugging/answers.py:guard_band")

# %%
n, guard = 1000, 64
for kernel in (dbg.unmasked_copy_kernel, dbg.copy_kernel):
    _, x = dbg.guarded(n, guard, fill="random")
    out_whole, out = dbg.guarded(n, guard)
    dbg.launch_copy(kernel, x, out)
    print(
        f"{kernel.__name__:22s} output correct: {torch.equal(out, x)}, "
        f"guard elements overwritten: {dbg.guard_writes(out_whole, n)}"
    )

# %% [markdown]
# The buggy kernel's output is *correct*; only the guard shows it wrote 24
# elements it did not own. A plain comparison of outputs would pass.
#
# ### 2. The wrong fill value for masked lanes
#
# A masked load returns `other` in the masked lanes, and those lanes take
# part in any reduction that follows. `other=0.0` is right for a sum and
# wrong for a max: on a row of negative numbers, the padding wins.

# %%
show("examples/debugging/answers.py:row_max_wrong_other")

# %%
x = -random_tensor((4, 37)).abs() - 0.5  # every value negative; 37 columns in a 64-wide block
print("other=0.0: ", dbg.row_max(x, dbg.row_max_wrong_other_kernel).tolist())
print("other=-inf:", [round(v, 4) for v in dbg.row_max(x).tolist()])
print("torch:     ", [round(v, 4) for v in x.max(dim=1).values.tolist()])

# %% [markdown]
# The neutral element of the reduction is the right padding: 0 for a sum,
# `-inf` for a max, `+inf` for a min, 1 for a product.
#
# ### 3. int32 offsets that overflow
#
# `tl.program_id` is an int32, and so is `pid * BLOCK` unless you widen it.
# Once a tensor has more than $2^{31} - 1$ elements (8 GiB of fp32, ordinary
# for a vocabulary-sized logits tensor), offsets wrap around to negative
# numbers and the kernel reads and writes far outside the tensor. NumPy's
# int32 arrays wrap the same way:

# %%
block = np.int32(1024)
pid = np.array([2**21 - 1, 2**21, 2**21 + 1], dtype=np.int32)
print("pid * BLOCK in int32:", (pid * block).tolist())
print("pid * BLOCK in int64:", (pid.astype(np.int64) * block).tolist())
row, stride = np.array([70_000], dtype=np.int32), np.int32(32_768)
print("row * stride for row 70,000 of a 32,768-wide matrix:", int((row * stride)[0]))

# %% [markdown]
# The cure is one cast before the multiplication:
# `tl.program_id(0).to(tl.int64) * BLOCK`, as the [vector
# addition](../../kernels/vector_add/) kernel does; the launcher should refuse
# sizes the kernel cannot address.
#
# ### 4. An arange whose bound is not a compile-time constant
#
# A block's shape must be known when the kernel is compiled, so `tl.arange`
# takes compile-time constants. Passing a runtime argument fails with:

# %%
show("examples/debugging/answers.py:runtime_arange")

# %%
x, out = random_tensor(64), torch.empty(64, device=academy.DEVICE)
show_error(lambda: dbg.runtime_arange_kernel[(1,)](x, out, 64))

# %% [markdown]
# Declare the bound `BLOCK: tl.constexpr`, pass it as a keyword, and mask
# against the runtime size.
#
# ### 5. A block size that is not a power of two
#
# `tl.arange(0, BLOCK)` needs a power-of-two range. For a row of 1000
# elements use `triton.next_power_of_2(1000)`, 1024, and a mask.

# %%
x, out = random_tensor(1000), torch.empty(1000, device=academy.DEVICE)
show_error(lambda: dbg.copy_kernel[(1,)](x, out, 1000, BLOCK=1000))

# %% [markdown]
# ### 6. A dot product with a dimension below 16
#
# Triton 3.6, the release our H100 results were measured with, compiles
# `tl.dot` only when the reduction dimension `K` is at least 16, the `K` of
# the fp16/bf16 tensor-core instructions. (Newer releases, such as the one
# this page was built with, accept
# `K = 8` for fp32 operands, the `K` of the TF32 instruction.) The interpreter
# multiplies any shapes, so this fp32 kernel runs here with `K = 8`:

# %%
show("examples/debugging/answers.py:small_dot")

# %%
a, b = random_tensor((16, 8)), random_tensor((8, 16))
c = torch.empty(16, 16, device=academy.DEVICE)
show_error(lambda: dbg.small_dot_kernel[(1,)](a, b, c, M=16, N=16, K=8))
print("max error vs a @ b:", (c - a @ b).abs().max().item())

# %% [markdown]
# Compiled for an H100 by Triton 3.6, the same call fails with a
# `CompilationError` whose last line reads
# `Input shapes should have M >= 1, N >= 1 and K >= 16` (the limits depend on
# the GPU, the dtype and the Triton release). Pad `K` to 16
# with masked loads (`other=0.0`), or fall back to a broadcast multiply and
# `tl.sum` for tiny tiles.
#
# ### 7. Passing a raw pointer instead of the tensor
#
# Triton turns a tensor argument into a typed pointer (`*fp32`). A Python int
# is just an int64 scalar, so adding offsets to it gives integers, not
# addresses, and `tl.load` refuses them:

# %%
x, out = random_tensor(100), torch.empty(100, device=academy.DEVICE)
show_error(lambda: dbg.copy_kernel[(2,)](x.data_ptr(), out, 100, BLOCK=64))

# %% [markdown]
# Pass tensors. (If you really hold a raw address, wrap it so Triton sees a
# `data_ptr()` method and a `dtype`; that is rarely the right design.)
#
# ### 8. Writing the output over the input
#
# `out = x` looks like a free in-place optimisation. It is correct only if
# each program reads nothing another program writes. This kernel computes
# `x[i] - x[i-1]`, so each block reads one element of the block before it:

# %%
show("examples/debugging/answers.py:aliasing")

# %%
x = random_tensor(300)
expected = torch.diff(x, prepend=torch.zeros(1, device=academy.DEVICE))
inplace = x.clone()
dbg.diff(inplace, out=inplace)
wrong = (inplace - expected).abs() > 1e-6
print("separate output correct:", torch.allclose(dbg.diff(x), expected))
print("in place, wrong elements at:", torch.nonzero(wrong).flatten().tolist())

# %% [markdown]
# Under the interpreter the programs run in order, so the bug shows at every
# block boundary (64, 128, ...), every time. On a GPU the programs run
# concurrently, and whether block 1 reads element 63 before or after block 0
# overwrote it is a race: a test can pass a thousand times and fail in
# production. Either allocate a separate output, or prove that each program
# reads only what it alone writes.
#
# ### 9. Floor division for the grid: the last elements never written
#
# `n // BLOCK` programs cover only the full blocks; the ragged tail is never
# touched. In an output from `torch.empty` the tail holds leftover memory,
# which can pass for a result; a poisoned output makes the gap plain:

# %%
show("examples/debugging/answers.py:floor_grid")

# %%
x = random_tensor(1000)
out = torch.full((1000,), float("nan"), device=academy.DEVICE)
dbg.copy_floor_grid(x, out)
print(
    f"grid of {1000 // dbg.BLOCK} programs; NaN left in elements "
    f"{torch.nonzero(out.isnan()).min().item()}..{torch.nonzero(out.isnan()).max().item()}"
)

# %% [markdown]
# Use `triton.cdiv(n, BLOCK)` for every grid dimension.
#
# ### 10. Forgetting contiguity: wrong results on a transposed tensor
#
# A kernel that walks `ptr + offsets` assumes the elements are one dense run
# in row-major order. A transposed or sliced tensor has other strides, and
# the kernel reads its memory in storage order, not in logical order:

# %%
x = random_tensor((5, 8)).t()  # shape (8, 5), strides (1, 8): a transposed view
out = torch.empty(8, 5, device=academy.DEVICE)
dbg.launch_copy(dbg.copy_kernel, x, out)
print("strides of x:", x.stride(), "| copy equals x:", torch.equal(out, x))
dbg.launch_copy(dbg.copy_kernel, x.contiguous(), out)
print("after x.contiguous():         copy equals x:", torch.equal(out, x))

# %% [markdown]
# The launcher must do one of three things: call `.contiguous()` (a copy),
# pass the strides to the kernel and use them, or refuse the input with a
# clear message. Never assume.
#
# ## A checklist for tests
#
# Irregular sizes (not multiples of the block), random inputs, poisoned
# outputs, guard bands where a kernel might overrun, non-contiguous inputs,
# an all-negative (or all-positive) case for every max (min), a size past
# $2^{31}$ elements on the GPU for int64 offsets, and the same tests compiled
# on a GPU, not only interpreted. `academy.testing` has the pieces.
#
# ## Exercises
#
# **1. Fix the scale kernel.** A colleague's `scale(x, a)` kernel has no
# mask, computes offsets in int32, launches `n // BLOCK` programs, and
# its launcher accepts a `data_ptr()` and transposed views. Write a version
# without these bugs: any shape, any strides, empty tensors, and a clear
# error for a non-tensor.

# %%
answer("examples/debugging/answers.py:answer_scale")

# %% [markdown]
# **2. Row minimum.** Write `row_min(x)` for a 2-D float tensor whose rows
# may be strided. Which `other=` does the masked load need?

# %%
answer("examples/debugging/answers.py:answer_row_min")

# %% [markdown]
# **3. A guard-band checker.** Write `out_of_bounds_writes(launch, n)` that
# runs `launch(x, out)` on guard-banded buffers and returns how many elements
# it wrote past `n`.

# %%
answer("examples/debugging/answers.py:answer_out_of_bounds")

# %%
x = random_tensor(1000)
assert torch.equal(dbg.scale(x, 2.0), 2.0 * x)
y = random_tensor((3, 37)) + 5.0
assert torch.equal(dbg.row_min(y), y.min(dim=1).values)
assert dbg.out_of_bounds_writes(lambda a, b: b.copy_(dbg.scale(a, 1.0)), 777) == 0
print("the answers pass their checks")
