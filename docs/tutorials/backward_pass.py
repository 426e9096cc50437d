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
# # How to write a backward pass
#
# A Triton kernel is invisible to autograd: PyTorch cannot differentiate
# through it, so every kernel used in training needs a hand-written backward.
# This tutorial writes one for an op small enough that every term is on the
# screen, a *learnable swish*:
#
# $$
# y_{ij} = x_{ij}\,\sigma(w_j\,x_{ij}), \qquad x \in \mathbb{R}^{M\times N},\; w \in \mathbb{R}^{N},
# $$
#
# one slope $w_j$ per column, shared by all $M$ rows. It has both kinds of
# gradient a layer has: $dx$, element-wise, and $dw$, which gathers a
# contribution from every row.
#
# ## What a backward computes: Jacobians and vector-Jacobian products
#
# For a function $f:\mathbb{R}^n\to\mathbb{R}^m$, the Jacobian
# $J_{ki} = \partial y_k/\partial x_i$ is an $m\times n$ matrix. Training ends
# in a scalar loss $L$, and the backward pass receives $\bar y = \partial
# L/\partial y$ (PyTorch's `grad_output`, our `dy`) and must return
#
# $$
# \bar x = J^\top \bar y, \qquad \bar x_i = \sum_k \bar y_k\,\frac{\partial y_k}{\partial x_i},
# $$
#
# a **vector-Jacobian product** (VJP). Autograd never builds $J$ (for a
# $4096\times4096$ activation it would have $2^{48}$ entries); a backward
# kernel computes the VJP directly, exploiting the structure of $J$.
#
# For our op, $y_{ij}$ depends on $x_{ij}$ and $w_j$ only, so the Jacobian
# with respect to $x$ is diagonal. With $s = \sigma(w_j x_{ij})$ and
# $\sigma' = s(1-s)$:
#
# $$
# \frac{\partial y_{ij}}{\partial x_{ij}} = s + x_{ij}\,s(1-s)\,w_j,
# \qquad
# \frac{\partial y_{ij}}{\partial w_j} = x_{ij}^2\,s(1-s).
# $$
#
# The VJPs follow: a diagonal Jacobian makes $dx$ element-wise, and since
# $w_j$ touches every row, its VJP sums over rows:
#
# $$
# dx_{ij} = dy_{ij}\bigl(s + w_j x_{ij}\,s(1-s)\bigr),
# \qquad
# dw_j = \sum_{i=1}^{M} dy_{ij}\,x_{ij}^2\,s(1-s).
# $$
#
# Written in PyTorch, before any kernel:

# %%
import academy
from academy.site.notebook import answer, bench_table, show

import torch

from examples.backward_pass.kernel import manual_backward, swish

show("examples/backward_pass/kernel.py:reference")

# %% [markdown]
# We can look at the whole Jacobian for a tiny input and see its structure:
# the block for $x$ is diagonal; the block for $w$ has one non-zero per row of
# $J$ in column $j$.

# %%
torch.manual_seed(0)
x_small = torch.randn(2, 3, dtype=torch.float64)
w_small = torch.randn(3, dtype=torch.float64)
j_x, j_w = torch.autograd.functional.jacobian(lambda a, b: a * torch.sigmoid(b * a), (x_small, w_small))
print("∂y/∂x reshaped to 6×6, non-zeros:\n", (j_x.reshape(6, 6) != 0).int())
print("∂y/∂w reshaped to 6×3, non-zeros:\n", (j_w.reshape(6, 3) != 0).int())

# %% [markdown]
# ## The kernels
#
# The forward is an element-wise kernel over a 2-D grid of tiles, loading the
# slice of $w$ its columns need:

# %%
show("examples/backward_pass/kernel.py:forward_kernel")

# %% [markdown]
# - `w` is loaded once per tile, as a row vector, and broadcast over the rows.
# - Low precision is upcast to fp32 after the load; fp64 stays fp64, so that
#   gradcheck (below) can run through the kernels themselves.
#
# The backward computes $dx$ for its tile and also the tile's partial $dw$:
# a column sum over its `BLOCK_M` rows. Each row-block writes its own row of
# a small buffer, and PyTorch sums that buffer's rows afterwards: a two-stage
# reduction with no atomics and a deterministic result. (The layer-norm
# tutorial does the same reduction with locked shared buffers instead.)

# %%
show("examples/backward_pass/kernel.py:backward_kernel")

# %% [markdown]
# - It loads $x$, not $s$: we saved the *input* and recompute
#   $\sigma(wx)$, which costs a few instructions and saves storing another
#   $M\times N$ tensor between the forward and the backward.
# - $s$ and $\sigma' = s(1-s)$ are the two terms both gradients share.
# - $dx$: the diagonal of the Jacobian times $dy$.
# - $dw$: $dy\,x^2\sigma'$ summed over the tile's rows, in fp32.
# - One partial row per row-block: no two programs write the same address.

# %%
show("examples/backward_pass/kernel.py:launcher")

# %% [markdown]
# - The partial buffer has one row per row-block, in fp32 (fp64 for fp64).
# - The second stage: sum the rows and cast to $w$'s dtype.
# - `dy` is made contiguous before the launch, because the kernel addresses
#   $x$ and $dy$ with the same row length. Autograd does not promise an
#   incoming gradient laid out like the output: after a sum over the rows
#   (`y.sum(0) @ v`) it is a row expanded to $M$ rows, strides $(0, 1)$. A
#   kernel that takes $dy$'s own row stride reads that in place, as the
#   [LayerNorm](../../kernels/layer_norm/) chapter's does.
#
# ## What an autograd Function saves and returns

# %%
show("examples/backward_pass/kernel.py:autograd")

# %% [markdown]
# - **What to save.** `save_for_backward` keeps tensors alive until the
#   backward (and checks they were not modified in place in between). Save
#   the cheapest set from which the backward can be computed: here the inputs
#   $x$ and $w$, and $s$ is recomputed. Saving $y$ instead would not suffice:
#   $s$ cannot be recovered from $y$ where $x = 0$.
# - The backward kernel returns both gradients at once, since they share $s$.
# - **What to return.** One value per argument of `forward`, in order: a
#   gradient for each tensor, `None` for anything that is not a tensor (the
#   dropout tutorial's `p` and `seed`, layer norm's `eps`) or for a tensor
#   that does not need one: `ctx.needs_input_grad` says which were asked for.
# - **Once differentiable.** The backward kernel has no backward of its own,
#   so `once_differentiable` makes a gradient of the gradient
#   (`create_graph=True`) raise, rather than silently leave this op out.
#
# ## Testing a backward
#
# Two tests, for two different questions:
#
# 1. **Is the math right?** `torch.autograd.gradcheck` compares our backward
#    with finite differences $\bigl(f(x+\epsilon e_i) - f(x-\epsilon e_i)\bigr)/2\epsilon$,
#    one input element at a time. That only works in float64: in fp32 the
#    difference quotient has an error of order $10^{-7}/\epsilon$. Our kernels
#    accept fp64 (the interpreter and GPUs both run fp64 Triton), so
#    gradcheck runs through the real kernels, on a tiny input since it
#    launches twice per element.
# 2. **Is the low-precision kernel accurate?** Compare against autograd through
#    `reference` in float64, with the relative-L2 tolerances of the handbook,
#    and allow up to twice the error PyTorch itself makes in the same dtype.
#    For $dx$ the tolerance is derived from its terms instead: $s + w x\,s(1-s)$
#    cancels near $w x \approx -1.28$, so the kernel's fp32 roundings are
#    relative to the terms, not to their small sum.

# %%
x64 = torch.randn(3, 5, dtype=torch.float64, device=academy.DEVICE, requires_grad=True)
w64 = torch.randn(5, dtype=torch.float64, device=academy.DEVICE, requires_grad=True)
print("gradcheck through the kernels:", torch.autograd.gradcheck(swish, (x64, w64), eps=1e-6, atol=1e-8))

x = torch.randn(33, 300, device=academy.DEVICE, dtype=torch.float16, requires_grad=True)
w = torch.randn(300, device=academy.DEVICE, dtype=torch.float16, requires_grad=True)
dy = torch.randn(33, 300, device=academy.DEVICE, dtype=torch.float16)
swish(x, w).backward(dy)
dx_ref, dw_ref = manual_backward(x.detach().double(), w.detach().double(), dy.double())
for name, ours, ref in (("dx", x.grad, dx_ref), ("dw", w.grad, dw_ref)):
    print(f"fp16 {name}: relative L2 error {((ours.double() - ref).norm() / ref.norm()).item():.1e}")

# %% [markdown]
# `tests/backward_pass/test_kernel.py` runs both over shapes that are not multiples
# of the block sizes, in fp32, fp16 and bf16, and also checks the hand-written
# `manual_backward` against autograd in float64.
#
# ## Measured on a GPU
#
# `examples/backward_pass/bench.py` times forward and forward+backward in
# bf16 for $M = 4096$ rows, against PyTorch eager and `torch.compile` of
# `x * torch.sigmoid(w * x)`. The bandwidth column counts the $M\times N$
# tensors only: 2 passes forward, 3 more backward ($x$ and $dy$ read, $dx$
# written).

# %%
bench_table("backward_pass")

# %% [markdown]
# Reading the table: eager PyTorch launches one kernel per operator and
# pays for every intermediate in memory, so the fused kernels are several
# times faster. `torch.compile` fuses too: it is slightly ahead of ours on the
# forward at every width, and on forward+backward it wins at narrow rows and
# loses at the widest, where our two-step `dw` reduction costs least.

# %% [markdown]
# ## The recipe, step by step
#
# Every backward in this handbook was written in the same six steps:
#
# 1. **Derive the vector-Jacobian product, not the Jacobian**, for every
#    input that can need a gradient, weights included, and write it in the
#    numerically stable form the kernel will compute.
# 2. **Check the derivation before writing a kernel**: the closed form in
#    PyTorch, in float64, against autograd through the reference.
# 3. **Choose what the forward saves**: the cheapest set the backward can
#    work from (inputs, a per-row statistic, or the output), recomputing the
#    rest.
# 4. **Write the kernels**: element-wise terms over the forward's tiles;
#    gradients that sum over rows (a weight's) as per-program partials in
#    fp32 and a second reduction stage, never a race on one buffer.
# 5. **Wrap them in a `torch.autograd.Function`** that returns one value per
#    argument of `forward`.
# 6. **Test**: gradcheck through the kernels in float64, then every gradient
#    against autograd on irregular shapes in every dtype, outputs poisoned.
#
# The kernel chapters apply it to bigger layers: a weight gradient over all
# rows in [LayerNorm](../../kernels/layer_norm/) and
# [RMSNorm](../../kernels/rms_norm/), a gradient written during the forward
# in [cross-entropy](../../kernels/cross_entropy/), and a backward that
# recomputes the forward's probabilities from a saved log-sum-exp in
# [attention](../../kernels/flash_attention/).

# %% [markdown]
# ## Exercises
#
# **1. SiLU.** Write `silu(x) = x·σ(x)` with a forward kernel, a backward
# kernel and an autograd Function that saves only `x`, and check it with
# gradcheck.

# %%
answer("examples/backward_pass/exercises.py:silu")

# %% [markdown]
# $\frac{d}{dx}\,x\sigma(x) = \sigma + x\sigma(1-\sigma) = \sigma\,(1 + x(1-\sigma))$.
# Tested in `tests/backward_pass/test_exercises.py`; run once here:

# %%
from examples.backward_pass.exercises import silu

xs = torch.randn(4, 7, dtype=torch.float64, device=academy.DEVICE, requires_grad=True)
print("silu gradcheck:", torch.autograd.gradcheck(silu, (xs,), eps=1e-6, atol=1e-8))

# %% [markdown]
# **2. Save or recompute?** For softmax the handbook's kernel saves the
# *output* $y$, but here we save the *input*. What decides it?
#
# <details class="success"><summary>Answer</summary>
#
# What the backward needs and what it costs to get. Softmax's VJP,
# $y \odot (dy - \langle y, dy\rangle)$, is written in terms of $y$, and
# recomputing $y$ from $x$ would need the row reductions again. Here the
# backward needs $\sigma(wx)$, which is cheap to recompute from $x$ but
# cannot be recovered from $y$ where $x = 0$, so we save $x$.
#
# </details>
#
# **3. Non-determinism.** Replace the partial buffer by `tl.atomic_add` of each
# tile's $dw$ into one fp32 vector. Is the result still correct? Is it the
# same on every run?
#
# <details class="success"><summary>Answer</summary>
#
# Correct to rounding, but not bit-reproducible: float addition is not
# associative and the order in which programs' atomics land changes from
# run to run, so the last bits of $dw$ change. The buffer plus a fixed-order
# second stage gives the same bits every time.
#
# </details>
