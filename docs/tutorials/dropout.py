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
# # Randomness: low-memory dropout
#
# Dropout zeroes each activation with probability $p$ during training and
# scales the survivors by $1/(1-p)$, so the expected value of every element
# is unchanged:
#
# $$
# y_i = \frac{m_i\,x_i}{1-p}, \qquad m_i \sim \mathrm{Bernoulli}(1-p),
# \qquad \mathbb{E}[y_i] = x_i .
# $$
#
# The backward needs the *same* mask: $\partial y_i/\partial x_i = m_i/(1-p)$,
# so $dx_i = dy_i\,m_i/(1-p)$. The obvious implementation therefore draws the
# mask, keeps it in memory until the backward, and reads it twice. This
# tutorial removes the mask from memory altogether: a counter-based random
# generator can *recompute* $m_i$ from a seed and the index $i$, as often as
# we like, bit for bit.

# %%
import academy
from academy.site.notebook import answer, bench_plot, bench_table, show

import torch

from examples.dropout.kernel import dropout, keep_mask, keep_mask_reference, reference

torch.manual_seed(0)
x = torch.randn(8, device=academy.DEVICE)
print("x            ", [round(v, 2) for v in x.tolist()])
print("dropout(p=.5)", [round(v, 2) for v in dropout(x, 0.5, seed=123).tolist()])
print("same seed    ", [round(v, 2) for v in dropout(x, 0.5, seed=123).tolist()])
print("other seed   ", [round(v, 2) for v in dropout(x, 0.5, seed=124).tolist()])

# %% [markdown]
# ## The baseline: a mask in memory
#
# The classic kernel takes the mask as a tensor, one byte per element, and
# applies it:

# %%
show("examples/dropout/kernel.py:explicit_kernel")

# %% [markdown]
# - The mask is loaded like any other input: a whole extra tensor to read.
# - `tl.where(keep, x * scale, 0)` with `scale` $= 1/(1-p)$ computed once on
#   the host: a multiply per element, not a division.
#
# Around it, something must *produce* the mask (a random kernel that writes
# it), and autograd must *keep* it until the backward:

# %%
show("examples/dropout/kernel.py:explicit_autograd")

# %% [markdown]
# What that costs, for $n$ elements of $b$ bytes:
#
# | | forward | backward | held between them |
# |---|---|---|---|
# | explicit mask | write mask $n$, read $x$ + mask $n(b+1)$, write $y$ $nb$ | read $dy$ + mask, write $dx$ | $n$ bytes per dropout layer |
# | seeded | read $x$, write $y$: $2nb$ | read $dy$, write $dx$: $2nb$ | one integer |
#
# In bf16 the mask adds half again to the forward's traffic (a byte written
# and a byte read per element, on top of the four of $x$ and $y$), and in a
# transformer with dropout after attention and after the
# MLP, those masks pile up with every layer until the backward frees them.
# There is a subtler drawback too: the mask is tied to a *generator state*.
# With activation checkpointing the forward is run a second time during the
# backward, and a stateful generator (such as `torch.rand`, which advances a
# global offset on every call) would draw a different mask the second time,
# unless the framework saves and restores its state around the recomputation,
# which PyTorch's checkpointing does for exactly this reason.
#
# ## Counter-based randomness: Philox
#
# Triton's `tl.rand(seed, offsets)` is *Philox 4×32-10*: a function that
# takes a 64-bit key (the seed) and a 128-bit counter (here the offset $i$)
# and mixes them with ten rounds of multiply, high/low split and XOR. There
# is no state to advance: the $i$-th number of stream `seed` is just
# $\mathrm{philox}(\text{seed}, i)$, computed by whichever thread owns
# element $i$. Same seed and offset, same number, in any program, on any
# call; different seed, an unrelated stream. The first 32-bit word of the
# result is turned into a float in $[0, 1)$.
#
# To be sure we understand it exactly, `reference` re-implements that
# function in PyTorch integer arithmetic (64-bit products split into 16-bit
# halves so nothing overflows int64):

# %%
show("examples/dropout/kernel.py:reference")

# %% [markdown]
# It matches Triton's generator bit for bit:

# %%
for seed in (0, 123, 2**40 + 7):
    same = torch.equal(keep_mask(5000, 0.3, seed).bool(), keep_mask_reference(5000, 0.3, seed, academy.DEVICE))
    print(f"seed {seed}: Triton mask == PyTorch Philox mask: {same}")

# %% [markdown]
# ## The seeded kernel
#
# Now the kernel draws the mask itself, from the element's own offset:

# %%
show("examples/dropout/kernel.py:seeded_kernel")

# %% [markdown]
# - The offsets are int64, and they are the counter: element $i$ of the
#   flattened tensor gets $\mathrm{philox}(\text{seed}, i)$ whatever block or
#   launch configuration computes it. Change `BLOCK_SIZE` and the mask stays
#   the same.
# - `tl.rand` returns fp32 in $[0, 1)$, uniform to about $2^{-31}$.
# - We keep when $u \ge p$. The Triton tutorial writes $u > p$; the two differ
#   only when $u = p$ exactly, except at $p = 0$: $u$ is exactly $0$ with
#   probability $2^{-31}$, so with a strict comparison a $2^{28}$-element
#   tensor has roughly a one-in-eight chance of losing an element at $p = 0$.
#   With $\ge$, $p = 0$ is exactly the identity.
#
# ## The backward from the same seed: the mask regenerated, never stored
#
# Since $dx_i = dy_i\,m_i/(1-p)$, the backward *is* dropout applied to $dy$
# with the same seed and $p$: the same kernel, launched on another tensor.
# The autograd Function saves two Python numbers and no tensor:

# %%
show("examples/dropout/kernel.py:autograd")

# %% [markdown]
# - `ctx.p` and `ctx.seed` are plain attributes: `save_for_backward` is for
#   tensors, and here there is none to save.
# - The backward is `dropout` itself, on `dy` with the forward's seed: exactly
#   the forward's mask. Being dropout, it is differentiable in turn, so a
#   gradient of the gradient (`create_graph=True`) is right too.
# - `forward` took three arguments, so `backward` returns three gradients:
#   `None` for `p` and `seed`, which are not tensors.

# %%
xg = torch.randn(2, 6, device=academy.DEVICE, requires_grad=True)
y = dropout(xg, 0.5, seed=7)
print("tensors saved for backward:", y.grad_fn.saved_tensors)
y.backward(torch.ones_like(y))
print("y != 0      ", (y != 0).int().tolist())
print("x.grad != 0 ", (xg.grad != 0).int().tolist())

# %% [markdown]
# The reader who wants a fresh mask every training step passes a fresh seed
# (from a counter, or `torch.randint` on the host); the reader who wants the
# same mask again, for checkpointing or debugging, passes the same seed.
#
# ## Checking a random op
#
# `tests/dropout/test_kernel.py` checks: the Triton mask equals the PyTorch Philox
# mask bit for bit; the output equals the reference; the same seed gives the
# same mask and another seed a different one; the kept count on $2^{15}$
# elements is $n(1-p)$ within six binomial standard deviations
# $\sqrt{n p (1-p)}$; kept values
# are $x/(1-p)$; the gradient is $dy\,m/(1-p)$ with the forward's mask and no
# saved tensor; $p=0$ is the identity; bad $p$ or seed raise. The statistics
# on 20000 elements in this notebook:

# %%
n = 20000
for p in (0.1, 0.5, 0.9):
    kept = (dropout(torch.randn(n, device=academy.DEVICE), p, seed=99) != 0).sum().item()
    sigma = (n * p * (1 - p)) ** 0.5
    print(f"p={p}: kept {kept} of {n}, expected {n * (1 - p):.0f} ± {sigma:.0f}")

# %% [markdown]
# ## Measured on a GPU
#
# The benchmark runner checks every provider against `reference` before it
# times it, and a random op passes only if it draws the same mask. So the
# spec (`examples/dropout/bench.py`) compares things that compute the same
# numbers:
#
# - **academy**: `dropout(x, p, seed)`, the mask regenerated in the backward;
# - **explicit_mask**: our kernel that writes the mask, reads it, and keeps it
#   for the backward (the same Philox mask);
# - **eager**: PyTorch eager, `torch.where(keep, x * scale, 0)`, with the
#   mask handed to it as an input: it is *not charged* for drawing the mask,
#   which favours it.
#
# `torch.nn.functional.dropout` is not in the table. It draws from PyTorch's
# own generator, so its output can never match ours, and we do not publish
# timings of an op whose result was not checked. Its work is the same as the
# explicit-mask provider's (draw, write a mask, apply; read the mask again in
# the backward), which is the comparison that row stands in for.
#
# The bandwidth column credits every provider with the seeded kernel's
# minimal traffic: $2nb$ bytes for the forward, $4nb$ for forward and
# backward, $p = 0.1$, up to $2^{28}$ elements in bf16 and fp32.

# %%
bench_table("dropout")

# %%
bench_plot("dropout", mode="fwd+bwd", dtype="bfloat16")

# %% [markdown]
# Philox costs arithmetic: ten rounds of two full $32 \times 32 \to 64$-bit
# multiplies. One call yields four 32-bit numbers, but `tl.rand` keeps only
# the first, so this kernel pays all ten rounds for every element. Is that
# free next to the memory traffic? The table answers it. In fp32 the seeded
# kernel runs close to the copy ceiling. In
# bf16 it takes about as long as in fp32 for half the bytes, so there the
# generator's integer arithmetic, not memory, sets the pace. That is also why
# the explicit-mask kernel, which reads a stored mask in the backward instead
# of drawing it again, catches up on forward+backward in bf16 (nearly at the
# largest sizes, and ahead at the smallest).
#
# ## Exercises
#
# **1. Dropout fused with the residual add.** A transformer block computes
# `residual + dropout(h)`. Write a kernel that does both in one pass, with the
# mask of `dropout(h, p, seed)`. How many passes over memory does it save?

# %%
answer("examples/dropout/exercises.py:dropout_add")

# %% [markdown]
# Unfused: dropout reads $h$ and writes a temporary, the add reads it and the
# residual and writes the output: 5 passes. Fused: 3. It is tested against the
# PyTorch reference in `tests/dropout/test_exercises.py`; run once here:

# %%
from examples.dropout.exercises import dropout_add

h, r = torch.randn(3, 500, device=academy.DEVICE), torch.randn(3, 500, device=academy.DEVICE)
expected = r + reference(h, 0.2, 5)
print("dropout_add error:", ((dropout_add(h, r, 0.2, 5) - expected).norm() / expected.norm()).item())

# %% [markdown]
# **2. Two dropout layers, one seed.** A model calls `dropout(a, p, seed)` and
# `dropout(b, p, seed)` on two tensors of the same shape in one step. What is
# wrong, and what are two ways to fix it?
#
# <details class="success"><summary>Answer</summary>
#
# The counter is the element's index, so both layers get the *same* mask:
# the two dropouts are perfectly correlated. Give each layer its own seed
# (for instance `seed = base_seed + layer_index`, with a generator that
# mixes seeds well, which Philox does), or give each layer its own range of
# counters by adding an offset to `offsets` (layer 2 starts at
# `a.numel()`): the stream is the same, the numbers are not.
#
# </details>
#
# **3. Why the mask need not be stored.** Explain in one sentence why the
# seeded version can recompute the mask in the backward but a version built
# on `torch.rand` inside the kernel launcher could not, without extra care.
#
# <details class="success"><summary>Answer</summary>
#
# Philox is a pure function of (seed, index), so the backward gets the same
# numbers by asking again; `torch.rand` reads and advances a global
# generator state, so a second call returns new numbers unless that state
# is saved before the forward and restored before the recomputation.
#
# </details>
