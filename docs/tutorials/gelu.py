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
# # Fusion, case study: GeLU
#
# An element-wise function does almost no arithmetic per byte it touches, so
# its speed is set by memory traffic, not by the formula. This tutorial takes
# one such function, GeLU, and writes it four ways: op by op in PyTorch, with
# PyTorch's built-in kernel, with `torch.compile`, and as our own Triton
# kernel. We count the bytes each one moves before timing anything, and along
# the way meet a numerical trap: a `tanh` written from its textbook definition
# returns NaN for perfectly ordinary inputs.
#
# ## The function
#
# GeLU weights its input by the probability that a standard normal variable
# falls below it, $\mathrm{GeLU}(x) = x\,\Phi(x)$. With the error function,
#
# $$
# \mathrm{GeLU}(x) = \tfrac12\,x\,\bigl(1 + \operatorname{erf}(x/\sqrt2)\bigr),
# $$
#
# and the cheaper approximation used by GPT-2 and many models since replaces
# $\operatorname{erf}$ by a $\tanh$ of a cubic:
#
# $$
# \mathrm{GeLU}_{\tanh}(x) = \tfrac12\,x\,\bigl(1 + \tanh z\bigr),
# \qquad z = \sqrt{2/\pi}\,\bigl(x + 0.044715\,x^3\bigr).
# $$
#
# PyTorch offers both as `F.gelu(x, approximate="none")` and
# `F.gelu(x, approximate="tanh")`; so does our `gelu`.

# %%

import academy
from academy.site.notebook import answer, bench_plot, bench_table, show

import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown

from examples.gelu.kernel import gelu, naive_gelu_tanh

torch.manual_seed(0)
x = torch.randn(4, 1000, device=academy.DEVICE) * 2
for approximate in ("none", "tanh"):
    expected = F.gelu(x.double(), approximate=approximate)
    error = ((gelu(x, approximate) - expected).norm() / expected.norm()).item()
    print(f"gelu(x, approximate={approximate!r}): relative error {error:.1e} against float64")

# %% [markdown]
# ## The naive version: one kernel per operator
#
# Written straight from the formula, the tanh form is a line of PyTorch. Here
# it is split so that each line holds the operators it launches:

# %%
show("examples/gelu/kernel.py:naive")

# %% [markdown]
# In eager mode every operator is its own kernel: it reads its inputs from
# GPU memory (HBM), computes, and writes a full-size result back, which the
# next operator reads again. Let us count instead of guessing. PyTorch lets a
# *dispatch mode* see every operator call; this one records, for each call,
# the bytes of the distinct tensors it reads and of the tensor it writes.

# %%
from torch.utils._python_dispatch import TorchDispatchMode


class CountTraffic(TorchDispatchMode):
    """Record (operator, bytes read, bytes written) for every call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.data_ptr(): a for a in args if isinstance(a, torch.Tensor) and a.dim() > 0}
        read = sum(t.numel() * t.element_size() for t in inputs.values())
        self.calls.append((func.overloadpacket.__name__, read, out.numel() * out.element_size()))
        return out


x = torch.randn(256, 256, dtype=torch.bfloat16)
with CountTraffic() as naive_traffic:
    naive_gelu_tanh(x)

one_pass = x.numel() * x.element_size()
rows = [
    f"| {i} | `{name}` | {read // one_pass} | {written // one_pass} |"
    for i, (name, read, written) in enumerate(naive_traffic.calls, start=1)
]
naive_read = sum(read for _, read, _ in naive_traffic.calls) // one_pass
naive_written = sum(written for _, _, written in naive_traffic.calls) // one_pass

Markdown(
    "\n".join(
        [
            "| kernel | operator | passes read | passes written |",
            "|---:|---|---:|---:|",
            *rows,
            f"| **naive: {len(naive_traffic.calls)} kernels** | | **{naive_read}** | **{naive_written}** |",
            "| **fused: 1 kernel** | | **1** | **1** |",
        ]
    )
)

# %% [markdown]
# A *pass* is one tensor the size of `x`. The fused kernel makes the minimum:
# read $x$ once, write $y$ once, $2 \cdot n \cdot b$ bytes for $n$ elements of
# $b$ bytes. The naive version makes many more, and since an element-wise
# kernel is limited by bandwidth, its time grows with that count. At the
# lecture's size, a $16384 \times 16384$ matrix in bf16, one pass is
# 512 MiB:

# %%
n, b = 16384 * 16384, 2
for label, passes in (("naive", naive_read + naive_written), ("fused", 2)):
    print(f"{label:>6}: {passes:2d} passes = {passes * n * b / 2**30:5.1f} GiB")
print(f"ratio: {(naive_read + naive_written) / 2:.1f}x the bytes, so at best that much slower")

# %% [markdown]
# Two more things count against the naive version: nine launches instead of
# one (a few microseconds each, which matter for small tensors), and eight
# full-size temporaries allocated along the way. Reading `x` twice in the
# same kernel (`x * x`) is counted once here: both loads hit the same
# addresses in one program, so the second comes from cache.
#
# The built-in `F.gelu(x, approximate="tanh")` is a single hand-written kernel:
# two passes. `torch.compile` gets there from the naive code itself: its
# Inductor backend traces the nine operators, sees that each element of the
# output depends only on the same element of the input, and emits **one
# Triton kernel** for the whole chain, which is what we are about to write by
# hand.
#
# ## The fused kernel
#
# One program owns a block of `BLOCK_SIZE` elements, loads them once, does all
# the arithmetic in registers and stores the result once:

# %%
show("examples/gelu/kernel.py:kernel")

# %% [markdown]
# - The block's starting offset is computed in int64: a $16384^2$ tensor has
#   $2^{28}$ elements, and one of $2^{31}$ or more would overflow int32
#   offsets.
# - The values are converted to fp32 right after the load. The arithmetic in
#   fp32 is free here (the kernel waits on memory anyway), it is more accurate
#   than rounding every step to bf16 as the naive version does, and Triton's
#   CPU interpreter computes wrongly in bf16.
# - `APPROXIMATE` is a `tl.constexpr`: each value compiles its own kernel,
#   with the other branch removed, so there is no run-time branch.
# - The exact form uses `tl.math.erf`; the tanh form calls `stable_tanh`,
#   below.
# - The store converts back to the output's dtype, and the mask keeps the last
#   block inside the tensor.
#
# The launcher around it checks its input (type, device, dtype, contiguity,
# the `approximate` string; an input that requires grad is refused, since
# there is no backward) and picks one program per `BLOCK_SIZE` elements:

# %%
show("examples/gelu/kernel.py:launcher")

# %% [markdown]
# ## An overflow-safe tanh
#
# Triton has no `tl.tanh` that works everywhere (`libdevice` has one, but
# the interpreter cannot call it: see the section on libdevice below), so we
# write it. The textbook definition is
#
# $$
# \tanh z = \frac{e^{2z} - 1}{e^{2z} + 1},
# $$
#
# and it fails. In fp32, $e^{w}$ overflows to $+\infty$ once
# $w > \ln(3.4\times10^{38}) \approx 88.7$, i.e. for $z > 44.4$. Then the
# fraction is $\infty/\infty$, which IEEE arithmetic defines as NaN. In GeLU,
# $z = \sqrt{2/\pi}\,(x + 0.044715\,x^3)$ passes 44.4 already at $x \approx 10$:
# an activation of 10 is not exotic.
#
# Divide the numerator and denominator by $e^{2z}$ instead and the sigmoid
# $\sigma(w) = 1/(1 + e^{-w})$ appears:
#
# $$
# \tanh z = \frac{1 - e^{-2z}}{1 + e^{-2z}} = \frac{2}{1 + e^{-2z}} - 1 = 2\,\sigma(2z) - 1 .
# $$
#
# Now the only exponential is in a denominator. For large positive $z$,
# $e^{-2z}$ underflows harmlessly to 0 and $\sigma = 1$; for large negative $z$
# it overflows to $\infty$, and $1/\infty = 0$, so $\sigma = 0$: no
# $\infty/\infty$ anywhere.

# %%
show("examples/gelu/kernel.py:tanh")

# %% [markdown]
# The same arithmetic in PyTorch fp32 shows the difference:

# %%
z = torch.tensor([0.5, 10.0, 44.0, 45.0, 100.0, -100.0])
with np.errstate(over="ignore"), torch.no_grad():
    textbook = (torch.exp(2 * z) - 1) / (torch.exp(2 * z) + 1)
    via_sigmoid = 2 * torch.sigmoid(2 * z) - 1
Markdown(
    "\n".join(
        ["| $z$ | textbook | $2\\sigma(2z) - 1$ | `torch.tanh` |", "|---:|---:|---:|---:|"]
        + [
            f"| {zi:g} | {a:.7g} | {s:.7g} | {t:.7g} |"
            for zi, a, s, t in zip(z.tolist(), textbook.tolist(), via_sigmoid.tolist(), torch.tanh(z).tolist())
        ]
    )
)

# %% [markdown]
# And through our kernel, at inputs far beyond where the textbook form breaks.
# (Under the CPU interpreter every `tl` operation is a NumPy call, and NumPy
# warns when $e^{-2z}$ overflows to $\infty$: that infinity is exactly the value
# we rely on, so the cell silences the warning.)

# %%
big = torch.tensor([-1e4, -50.0, -12.0, 12.0, 50.0, 1e4], device=academy.DEVICE)
with np.errstate(over="ignore"):
    print("gelu(x, 'tanh') =", gelu(big, "tanh").tolist())
    print("gelu(x, 'none') =", gelu(big, "none").tolist())

# %% [markdown]
# For large positive $x$ GeLU is $x$, for large negative $x$ it is (minus)
# zero, exactly as PyTorch computes it. One caveat: $2\sigma(2z) - 1$ loses
# *relative* accuracy near $z = 0$, where $\tanh z$ is tiny and we subtract two
# numbers close to 1. GeLU adds 1 right back, so only the absolute error
# matters there, and it stays at fp32 rounding. (The first exercise removes the
# subtraction altogether.)

# %% [markdown]
# ## Calling libdevice, an extern function
#
# The exact form needs $\operatorname{erf}$, and $\operatorname{erf}$ is not an
# elementary function: it is the integral
# $\operatorname{erf}(x) = \tfrac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt$, which no
# finite combination of `exp`, `log` and arithmetic computes. A kernel gets it
# from a library that evaluates it by polynomial approximations. How far the
# tanh form strays from the exact one, in float64 on $[-6, 6]$:

# %%
grid = torch.linspace(-6, 6, 120001, dtype=torch.float64)
exact = F.gelu(grid, approximate="none")
gap = (F.gelu(grid, approximate="tanh") - exact).abs()
worst = gap.argmax()
print(f"largest |GeLU_tanh − GeLU| on [-6, 6]: {gap[worst]:.1e}, at x = {grid[worst]:+.3f}")
print(f"GeLU there: {exact[worst]:.2e}, so the gap is {gap[worst] / exact[worst].abs():.1%} of the value")

# %% [markdown]
# Where the gap is largest it is a visible fraction of the value, far above
# fp32's relative rounding of $2^{-24}$: a model trained with the exact form
# wants $\operatorname{erf}$ itself.
#
# Triton's `tl.math` has a short list of such functions, `erf` among them
# (our `gelu` above calls `tl.math.erf`), and no `tanh`. The rest of the CUDA
# math library is reached through **libdevice**: NVIDIA ships its math
# functions as *libdevice*, a library of LLVM bitcode (NVVM IR) that a
# compiler links into the kernel it is building. NVIDIA's *CUDA libdevice
# User's Guide* documents each function, named with the prefix `__nv_`:
# `__nv_erff` is the fp32 `erf`. Triton wraps them as element-wise functions
# of its own. Here is exact GeLU written with libdevice's `erf`:

# %%
show("examples/gelu/libdevice_erf.py:libdevice_kernel")

# %% [markdown]
# - As in `gelu_kernel`, the values are computed in fp32 whatever the
#   input's dtype: libdevice's `erf` takes fp32 or fp64 only.
# - `USE_LIBDEVICE` is a `tl.constexpr`, so each value compiles its own
#   kernel and the other branch is removed.
# - `libdevice.erf` comes from `from triton.language.extra import libdevice`.
#   That module holds stubs, functions with an empty body; when Triton
#   compiles for a GPU, its backend replaces the module by its own library,
#   `triton.language.extra.cuda.libdevice` on NVIDIA GPUs and the HIP one on
#   AMD GPUs (`get_module_map` in `triton/backends/nvidia/compiler.py`). The
#   CUDA module can be imported directly too, in Triton 3.6 as in the Triton
#   this page runs on, but a kernel that names it runs on NVIDIA GPUs only;
#   the stub module keeps the kernel portable.
# - `tl.math.erf` is the branch Triton's CPU interpreter runs, below.
# - For negative $x$, $1 + \operatorname{erf}(x/\sqrt2)$ cancels, as in
#   `gelu_kernel`; the tests' tolerance accounts for it.
#
# The launcher picks the branch once, from where kernels run:

# %%
show("examples/gelu/libdevice_erf.py:libdevice_launcher")

# %% [markdown]
# ### What the interpreter does instead
#
# Triton's interpreter (`triton/runtime/interpreter.py`) runs the kernel as
# Python, one NumPy call per `tl` operation. It has no libdevice: nothing
# replaces the stub module, so `libdevice.erf` runs its empty body, returns
# `None`, and the next operation fails. Calling
# `triton.language.extra.cuda.libdevice.erf` by that name fails as well: the
# interpreter sets up only `tl`'s own functions, and it has no way to run an
# extern call anyway (its `create_extern_elementwise` raises
# `NotImplementedError`). Forcing the libdevice branch under the interpreter
# shows the first failure:

# %%
from examples.gelu.libdevice_erf import gelu_erf_libdevice, gelu_erf_libdevice_kernel

x = torch.randn(1000, device=academy.DEVICE) * 3
if academy.INTERPRETED:
    y = torch.empty_like(x)
    try:
        gelu_erf_libdevice_kernel[(1,)](x, y, x.numel(), USE_LIBDEVICE=True, BLOCK_SIZE=1024)
    except Exception as error:
        print(f"{type(error).__name__}: {str(error).splitlines()[-1]}")
expected = F.gelu(x.double(), approximate="none")
error = ((gelu_erf_libdevice(x) - expected).norm() / expected.norm()).item()
print(f"gelu_erf_libdevice(x): relative error {error:.1e} against float64")

# %% [markdown]
# With `USE_LIBDEVICE` false the kernel calls `tl.math.erf`, and the
# interpreter evaluates that with Python's own `math.erf`, in double
# precision, element by element, and rounds each result to fp32. The kernel's
# output under the interpreter is exactly that, bit for bit
# (`test_interpreter_erf_is_pythons_math_erf_rounded_to_fp32` in
# `tests/gelu/test_libdevice.py`), and matches PyTorch's exact GeLU within
# fp32 rounding.
#
# ### On the GPU, both branches are the same code
#
# Triton's compiler runs without a GPU: it can compile the two branches for an
# H100 (sm_90) right here. The libdevice branch enters Triton's IR as an
# extern call to `__nv_erff`; the other as the math dialect's `erf`, which the
# NVIDIA backend lowers to a call of the same `__nv_erff`. libdevice is then
# linked in and the call inlined, and the two PTX listings come out the same:

# %%
import re

from examples.gelu.libdevice_erf import compile_for_h100, ptx_instructions

compiled = {use: compile_for_h100(use) for use in (True, False)}
for use, stages in compiled.items():
    ir_line = next(
        text.strip() for text in stages["ttir"].splitlines() if re.search(r"extern_elementwise|math\.erf", text)
    )
    print(f"USE_LIBDEVICE={use}: {ir_line.split(' loc(')[0]}")
ptx = {use: ptx_instructions(stages["ptx"]) for use, stages in compiled.items()}
print(f"PTX instructions: {len(ptx[True])} and {len(ptx[False])}, identical: {ptx[True] == ptx[False]}")
print("calls left in the PTX:", sum(text.startswith("call") for text in ptx[True]))

# %% [markdown]
# So for `erf` the libdevice call buys nothing over `tl.math.erf`: on an
# NVIDIA GPU both are libdevice's `__nv_erff`. It is the way in for everything
# `tl.math` lacks: `libdevice.tanh`, `erfinv`, `erfcx`, `lgamma` and the
# rest, each with a fallback to write for the interpreter, as the tanh above
# has. The tests check the libdevice kernel against float64 PyTorch, at
# $\pm\infty$, at large $|x|$ and with NaN inputs (PyTorch and the kernel
# both give NaN at $-\infty$, where $\tfrac12 x\,(1 + \operatorname{erf})$ is
# $-\infty \cdot 0$), and, on a GPU, that the compiled kernel names
# `__nv_erff` and gives the same bits as the `tl.math.erf` branch.

# %% [markdown]
# ## Measured on a GPU
#
# The benchmark (`examples/gelu/bench.py`) times the tanh form in bf16 on
# square matrices up to the lecture's $16384 \times 16384$, for four
# providers: **ours**, **naive** (the op-by-op code above), **eager**
# (`F.gelu(x, approximate="tanh")`) and **torch.compile** of the naive code.
# The bandwidth column counts the minimal traffic, $2 \cdot n \cdot b$ bytes,
# for every provider, so it says how close each comes to one read and one
# write; the naive version really moves about ten times more than it is
# credited with. Each result is the GPU time of CUDA-graph replays over input
# copies larger than the L2 cache ([Performance](../../performance/) explains
# the method).

# %%
bench_table("gelu")

# %%
bench_plot("gelu", sweep="square", mode="fwd", dtype="bfloat16")

# %% [markdown]
# What to look for in the table: the three fused providers (ours, eager,
# compile) should sit close together near the copy ceiling at large sizes,
# since they move the same two passes; the naive version should be slower by
# roughly the ratio of passes counted above. On small matrices (a few MiB,
# rotated out of L2 like the rest) the fixed cost of a kernel dominates (see
# [Measuring honestly](../measuring/), section 6), and none of the providers
# reaches HBM bandwidth.
#
# ## Exercises
#
# **1. No tanh at all.** Show that $\tfrac12\,(1 + \tanh z) = \sigma(2z)$, so
# that $\mathrm{GeLU}_{\tanh}(x) = x\,\sigma(2z)$. Write a kernel that computes
# it this way. What does it save, and which subtraction disappears?

# %%
answer("examples/gelu/exercises.py:sigmoid_form")

# %% [markdown]
# From $\tanh z = 2\sigma(2z) - 1$: $\tfrac12(1 + 2\sigma(2z) - 1) = \sigma(2z)$.
# As written, the kernel saves two multiplies and two additions per element
# ($2\sigma$, $-1$, $1 +$, $\tfrac12 x$; invisible in a memory-bound
# kernel) and, more usefully, never forms $1 + \tanh z$ for
# negative $z$, where $\tanh z \approx -1$ and the sum cancels.
#
# **2. GeGLU.** Gated feed-forward layers compute
# $h = \mathrm{GeLU}(\mathit{gate}) \odot \mathit{up}$ for two tensors of the same
# shape. Count the passes of `F.gelu(gate) * up` and of a fused kernel, then
# write the fused kernel.

# %%
answer("examples/gelu/exercises.py:geglu")

# %% [markdown]
# Unfused: GeLU reads `gate` and writes a temporary (2 passes), the multiply
# reads the temporary and `up` and writes $h$ (3 passes): 5 in all. Fused: read
# `gate` and `up`, write $h$: 3 passes, so up to $5/3 \approx 1.7\times$ faster
# on large tensors.
#
# Both answers are tested against float64 PyTorch in
# `tests/gelu/test_exercises.py`. Here they are, run once:

# %%
from examples.gelu.exercises import geglu, gelu_tanh_sigmoid

gate, up = torch.randn(3, 777, device=academy.DEVICE) * 2, torch.randn(3, 777, device=academy.DEVICE)
expected = F.gelu(gate.double(), approximate="tanh")
print("x·σ(2z) error:", ((gelu_tanh_sigmoid(gate) - expected).norm() / expected.norm()).item())
expected = expected * up.double()
print("geglu error:  ", ((geglu(gate, up) - expected).norm() / expected.norm()).item())

# %% [markdown]
# **3. Think about it.** Our kernel converts to fp32, and the naive bf16
# version rounds every intermediate to bf16. Which one do you expect to be
# closer to the float64 result, and does the extra fp32 arithmetic cost any
# time on a GPU?
#
# <details class="success"><summary>Answer</summary>
# <p>Ours: it rounds once, at the store, while the naive version rounds after
# each of its nine operators. The conversion costs no measurable time: the
# kernel spends its life waiting for memory, and a few more register
# operations per element hide under that wait.</p>
# </details>
