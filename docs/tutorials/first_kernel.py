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
# # Your first kernel, run on a CPU
#
# This notebook runs a real Triton kernel without a GPU. It uses the vector
# addition kernel of the [Vector addition](../../kernels/vector_add/) chapter,
# calls it, checks it, and then looks at the three ideas every Triton kernel
# is built from: the **grid** of programs, the **block** of offsets each
# program owns, and the **mask** that keeps the last block inside the tensor.
#
# ## The interpreter switch
#
# Triton compiles `@triton.jit` functions for a GPU. With the environment
# variable `TRITON_INTERPRET=1` it instead runs them on the CPU: each program
# of the grid executes one after the other, and each `tl.` operation works on
# NumPy arrays. Results are the same (with a few documented gaps, such as
# bfloat16 arithmetic); speed is not.
#
# Triton reads the variable when a kernel is *defined*, so it must be set
# before the kernel module is imported. `import academy` does that for you:
# it sets `TRITON_INTERPRET=1` when no CUDA GPU is present, and records the
# decision in `academy.DEVICE` and `academy.INTERPRETED`.

# %%
import os

import academy

import torch

print("device:", academy.DEVICE)
print("interpreted:", academy.INTERPRETED)
print("TRITON_INTERPRET =", os.environ.get("TRITON_INTERPRET"))

# %% [markdown]
# Now import the chapter's kernel. `add` is the launcher (it checks the inputs,
# allocates the output and launches), `add_kernel` is the `@triton.jit`
# function itself, and `reference` is the plain PyTorch version that tests
# compare against. On a CPU `add_kernel` is an `InterpretedFunction`; on a GPU
# it is a `JITFunction` that compiles on its first launch.

# %%
from examples.vector_add.kernel import BLOCK_SIZE, add, add_kernel, reference

print(type(add_kernel).__name__, "with BLOCK_SIZE =", BLOCK_SIZE)

# %% [markdown]
# ## Run it and check it
#
# Tensors go on `academy.DEVICE`, so this cell runs unchanged on a GPU.
# The sum of two floats is not exact, but IEEE 754 fixes its rounding: the
# kernel's fp32 add and PyTorch's round `x + y` to the same nearest float,
# so we can demand equality, not just closeness.

# %%
torch.manual_seed(0)
x = torch.randn(10_000, device=academy.DEVICE)
y = torch.randn(10_000, device=academy.DEVICE)

out = add(x, y)
expected = reference(x, y)

print("first values:", out[:4].tolist())
print("identical to the reference:", torch.equal(out, expected))
assert torch.equal(out, expected)

# %% [markdown]
# ## Grid, block, mask
#
# The launcher splits the `n` elements into blocks of `BLOCK_SIZE` and starts
# one *program* per block. The number of programs is the ceiling of
# `n / BLOCK_SIZE`, which `triton.cdiv` computes. Program `pid` owns offsets
# `pid * BLOCK_SIZE ... pid * BLOCK_SIZE + BLOCK_SIZE - 1`.
#
# Take a *ragged* size, one that is not a multiple of the block. The last
# program's block then runs past the end of the tensor, and the mask
# `offsets < n` switches those lanes off: masked loads read nothing and masked
# stores write nothing.

# %%
import triton

n = 2 * BLOCK_SIZE + 123  # two full blocks and a ragged tail
grid = (triton.cdiv(n, BLOCK_SIZE),)
print(f"n = {n}, BLOCK_SIZE = {BLOCK_SIZE}, grid = {grid}")

for pid in range(grid[0]):
    offsets = pid * BLOCK_SIZE + torch.arange(BLOCK_SIZE)
    mask = offsets < n
    print(
        f"program {pid}: offsets {offsets[0].item()}..{offsets[-1].item()}, "
        f"{int(mask.sum())} lanes active, {int((~mask).sum())} masked off"
    )

# %% [markdown]
# The kernel does exactly this. Running it on the ragged size proves the tail
# is handled: we fill the output of a second call with NaN first ("poisoning")
# so that any element the kernel forgot to write would show up.

# %%
a = torch.randn(n, device=academy.DEVICE)
b = torch.randn(n, device=academy.DEVICE)

poisoned = torch.full((n,), float("nan"), device=academy.DEVICE)
add_kernel[grid](a, b, poisoned, n, 1, 1, BLOCK_SIZE=BLOCK_SIZE)

print("NaNs left:", int(poisoned.isnan().sum()))
print("matches the reference:", torch.equal(poisoned, reference(a, b)))
assert torch.equal(poisoned, reference(a, b))

# %% [markdown]
# ## Bad inputs get a clear message
#
# A kernel does not check anything: handed tensors of different sizes it would
# read past the end of the shorter one, and on a GPU that is silent garbage or
# a crash. The launcher is where the checks live, and its errors say what was
# expected.

# %%
try:
    add(torch.randn(5, device=academy.DEVICE), torch.randn(6, device=academy.DEVICE))
except ValueError as err:
    print("ValueError:", err)

try:
    add(torch.randn(5, device=academy.DEVICE), torch.arange(5, device=academy.DEVICE))
except TypeError as err:
    print("TypeError:", err)

# %% [markdown]
# ## Exercises
#
# **1. Scale a tensor.** Write `scale(x, alpha)`, which returns `alpha * x`,
# with the same three ideas: a grid of `cdiv(n, BLOCK_SIZE)` programs, a block
# of offsets per program, and a mask for the last block. A Python float
# passed to a kernel arrives as a scalar every program can use.

# %%
from academy.site.notebook import answer

answer("examples/first_kernel/answers.py:scale")

# %% [markdown]
# **2. Forget `cdiv`.** What goes wrong if the grid is `n // BLOCK_SIZE`
# programs instead? How many elements of a 1000-element tensor stay unwritten
# with a block of 256, and why would a test on a zero-filled output not notice?

# %%
answer("examples/first_kernel/answers.py:floor_grid")

# %% [markdown]
# Floor division drops the last, partial block: 1000 // 256 = 3 programs
# cover 768 elements and 232 are never written. An output allocated with
# `torch.zeros` and an input near zero would hide it. That is why our tests
# fill outputs with NaN first. Both answers are tested in
# `tests/first_kernel/test_answers.py`.
#
# ## What next
#
# - Read the [Vector addition](../../kernels/vector_add/) chapter for the
#   annotated kernel, the int64 offsets and the bandwidth it reaches on a GPU.
# - Change `n` above to 1, or to `BLOCK_SIZE`, and predict the grid before you
#   run the cell.
