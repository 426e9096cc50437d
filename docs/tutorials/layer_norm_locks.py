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
# # Layer norm, the tutorial way
#
# Layer norm normalises each row of $x \in \mathbb{R}^{M\times N}$ to mean 0
# and variance 1, then applies a learned per-column scale $\gamma$ and shift
# $\beta$:
#
# $$
# \mu = \frac1N\sum_j x_j,\quad
# \sigma = \sqrt{\frac1N\sum_j (x_j-\mu)^2 + \varepsilon},\quad
# \hat x_j = \frac{x_j-\mu}{\sigma},\quad
# y_j = \gamma_j\,\hat x_j + \beta_j .
# $$
#
# This tutorial builds it the way Triton's own tutorial does: a forward that
# keeps $\mu$ and $1/\sigma$ per row, a backward whose $dx$ we derive in matrix
# form, and a reduction of $d\gamma$, $d\beta$ over all rows through
# `GROUP_SIZE_M` partial buffers guarded by spin locks, which is where a
# missing barrier silently corrupts results.

# %%
import academy
from academy.site.notebook import answer, bench_table, show

import torch
import torch.nn.functional as F

from examples.layer_norm_locks.kernel import layer_norm

torch.manual_seed(0)
x = (torch.randn(64, 300, device=academy.DEVICE) * 0.5 - 2.3).requires_grad_()
w = torch.rand(300, device=academy.DEVICE, requires_grad=True)
b = torch.randn(300, device=academy.DEVICE, requires_grad=True)
dy = torch.randn(64, 300, device=academy.DEVICE)
layer_norm(x, w, b).backward(dy)
leaves = [t.detach().double().requires_grad_() for t in (x, w, b)]
F.layer_norm(leaves[0], (300,), leaves[1], leaves[2]).backward(dy.double())
for name, ours, ref in zip(("dx", "dγ", "dβ"), (x, w, b), leaves):
    print(f"{name}: relative error {((ours.grad - ref.grad).norm() / ref.grad.norm()).item():.1e} vs float64 autograd")

# %% [markdown]
# ## Forward

# %%
show("examples/layer_norm_locks/kernel.py:forward_kernel")

# %% [markdown]
# - Lanes past the row's end were loaded as 0, but $0 - \mu \neq 0$: zero them
#   again before squaring, or they add $\mu^2$ each to the variance.
# - The variance is computed from the centred values (two passes over
#   registers), not as $\overline{x^2} - \mu^2$, which cancels badly when
#   $|\mu| \gg \sigma$ (our test inputs have $\mu \approx -2.3$, $\sigma \approx 0.5$).
# - $\mu$ and $1/\sigma$ are stored, 8 bytes per row: the backward needs them
#   and they are cheap to keep.
#
# ## The backward, derived
#
# Take one row. $\hat x$ depends on every $x_k$ through $\mu$ and $\sigma$:
#
# $$
# \frac{\partial \mu}{\partial x_k} = \frac1N,\qquad
# \frac{\partial \sigma}{\partial x_k} = \frac{1}{2\sigma}\cdot\frac2N\sum_j (x_j-\mu)\Bigl(\delta_{jk} - \frac1N\Bigr)
# = \frac{x_k-\mu}{N\sigma} = \frac{\hat x_k}{N},
# $$
#
# (the $-\frac1N$ terms sum to zero because $\sum_j (x_j - \mu) = 0$). Then, by
# the quotient rule,
#
# $$
# \frac{\partial \hat x_j}{\partial x_k}
# = \frac{\delta_{jk} - \frac1N}{\sigma} - \frac{x_j-\mu}{\sigma^2}\,\frac{\hat x_k}{N}
# = \frac1\sigma\Bigl(\delta_{jk} - \frac1N - \frac{\hat x_j\,\hat x_k}{N}\Bigr).
# $$
#
# In matrix form, with $\mathbf 1$ the vector of ones, that is the whole
# Jacobian of one row:
#
# $$
# \frac{\partial \hat x}{\partial x} = \frac1\sigma\Bigl(I - \frac1N\mathbf 1\mathbf 1^\top - \frac1N\hat x\,\hat x^\top\Bigr),
# \qquad
# \frac{\partial y}{\partial x} = \operatorname{diag}(\gamma)\,\frac{\partial \hat x}{\partial x}.
# $$
#
# The bracket is symmetric, so the VJP $dx = J^\top dy$ needs no transpose.
# With $g = \gamma \odot dy$:
#
# $$
# dx = \frac1\sigma\Bigl(I - \frac1N\mathbf 1\mathbf 1^\top - \frac1N\hat x\,\hat x^\top\Bigr) g
# = \frac1\sigma\Bigl(g - \overline{g}\,\mathbf 1 - \overline{g\odot\hat x}\;\hat x\Bigr),
# $$
#
# where an overline is a mean over the row. The matrix is never formed: two
# row reductions, $\overline g$ and $\overline{g\odot\hat x}$, and an
# element-wise expression. Read geometrically, $dx$ is $g$ with its
# components along $\mathbf 1$ and along $\hat x$ removed (the bracket is, up to
# $1/\sigma$, a projection): shifting a row or scaling it does not change its
# layer norm, so the gradient has no component in those directions.
#
# $\gamma$ and $\beta$ are shared by all $M$ rows, so their VJPs sum over rows:
#
# $$
# d\gamma = \sum_{i=1}^{M} dy_{i}\odot\hat x_{i},\qquad d\beta = \sum_{i=1}^{M} dy_{i}.
# $$
#
# `tests/layer_norm_locks/test_math.py` checks the Jacobian matrix against
# `torch.autograd.functional.jacobian` and the three VJPs against autograd,
# all in float64. A quick look at the matrix form here:

# %%
n = 6
row = torch.randn(n, dtype=torch.float64) * 2 + 1
gamma = torch.rand(n, dtype=torch.float64)
mu, sigma = row.mean(), torch.sqrt(((row - row.mean()) ** 2).mean() + 1e-5)
x_hat = (row - mu) / sigma
ones = torch.ones(n, 1, dtype=torch.float64)
ours = (
    torch.diag(gamma) @ (torch.eye(n, dtype=torch.float64) - ones @ ones.T / n - torch.outer(x_hat, x_hat) / n) / sigma
)
autograd = torch.autograd.functional.jacobian(lambda v: F.layer_norm(v, (n,), gamma, None, 1e-5), row)
print("max |J_ours - J_autograd| =", (ours - autograd).abs().max().item())

# %% [markdown]
# ## The backward kernel: dx, and a share of dγ, dβ

# %%
show("examples/layer_norm_locks/kernel.py:backward_dx_kernel")

# %% [markdown]
# - $\mu$ and $1/\sigma$ from the forward: nothing is reduced twice.
# - $g = dy \odot \gamma$.
# - $dx = \frac1\sigma(g - \overline g - \hat x\,\overline{g\odot\hat x})$, the formula above term for term.
# - Rows are dealt to `GROUP_SIZE_M` buffers round-robin: row $i$ adds into buffer $i \bmod$ `GROUP_SIZE_M`.
# - **The lock.** `atomic_cas(lock, 0, 1)` writes 1 only if it reads 0, and
#   returns what it read: a program that reads 1 spins, the one that reads 0
#   owns the buffer.
# - **The count.** The buffers come from `torch.empty` (no zero-fill kernel), so
#   the first program to own a buffer must *store* rather than add.
#   `atomic_xchg(count, 1)` sets the flag and returns its old value in one step.
# - Later owners add to what is there. The load uses `.cg` (cache at L2
#   only): another SM wrote these values, and a stale line in this SM's L1
#   must not answer.
# - **The barrier** before the release: next section.
# - The release: set the lock back to 0.
#
# Then a second kernel reduces each column over the `GROUP_SIZE_M` buffers:

# %%
show("examples/layer_norm_locks/kernel.py:backward_dwdb_kernel")

# %% [markdown]
# - Each program owns `BLOCK_N` columns and walks down the buffers.
# - One final sum per column, cast to the weight's dtype.
#
# Why not have every row add straight into one $d\gamma$ vector with
# `tl.atomic_add`? With $M = 4096$ rows all programs would hit the same $N$
# addresses. Spreading them over `GROUP_SIZE_M` buffers divides the
# contention by `GROUP_SIZE_M`, at the price of a second, small reduction
# over `GROUP_SIZE_M` $\times N$ values. The choice of `GROUP_SIZE_M`:

# %%
show("examples/layer_norm_locks/kernel.py:launcher")

# %% [markdown]
# - More buffers for narrow rows: a narrow row's critical section is short,
#   so programs arrive at the locks faster and more of them collide; more
#   buffers cost little because each is only $N$ floats. For wide rows the
#   buffers grow ($64 \times 16384 \times 4$ bytes = 4 MiB each for $d\gamma$ and
#   $d\beta$) and the second stage reads all of them, so fewer is better. The
#   thresholds are the Triton tutorial's; they were tuned there, on one GPU,
#   and are a starting point, not a law.
# - Partial buffers in fp32 whatever the input dtype.
# - Locks and counts in one zeroed int32 array: $2\times$`GROUP_SIZE_M` values.
# - `dy.reshape(...).contiguous()`: the kernels step through $x$, $dy$ and
#   $dx$ by the same row length, $N$, and autograd does not promise a $dy$
#   laid out like $x$. After a sum over the rows (`y.sum(0) @ v`) it hands over a $dy$ expanded
#   from one row, strides $(0, 1)$; read with $x$'s stride, as the 2022
#   tutorial did, that walks far past its single row. Here it is copied; the
#   [LayerNorm](../../kernels/layer_norm/) chapter passes $dy$'s own row
#   stride instead and reads it in place.
#
# ## Why the release needs a barrier
#
# A Triton program is executed by many threads (`num_warps` × 32). The
# buffer stores are done by *all* of them, each for its own columns; the
# lock is a scalar, taken and released by *one* thread. Nothing orders the
# other threads' stores before that thread's release: a warp can still be
# waiting to issue its store when the lock is already free. The next owner
# then reads the old value for those columns, adds its row, and stores; and
# the late store of the first program lands afterwards and overwrites it.
# A row's contribution is lost, silently, on some runs.
#
# `tl.debug_barrier()` makes every thread of the program finish its stores
# before any thread passes the barrier, so when the lock is released the
# buffer holds this program's result. (The release atomic itself has release
# semantics by default, so those stores, once they precede it, are visible to
# whoever acquires the lock next.)
#
# The CPU interpreter runs programs one after another, so a race cannot
# happen there. Instead, here is a deterministic simulation of two programs,
# A adding 1.0 and B adding 10.0 to a 4-lane buffer, with A's lane 2 slow:

# %%
show("examples/layer_norm_locks/exercises.py:race")

# %%
from examples.layer_norm_locks.exercises import race

for barrier in (True, False):
    result = race(barrier)
    print(f"barrier={barrier}: buffer {result}")
    for event in race.log:
        print("   ", event)

# %% [markdown]
# With the barrier every lane holds $1 + 10 = 11$. Without it, lane 2 holds
# 1.0: B read 0 there (A's store had not landed), stored 10, and A's late store
# of 1 overwrote it. On a GPU this happens only when warps drift apart at the
# wrong moment, which is exactly why it is dangerous: tests pass most days.
#
# ## The original tutorial's settings, and how it measured
#
# The Triton tutorial this design comes from chooses its meta-parameters with
# a few fixed rules, and ours follows them (see `group_size_m` and `_warps` in
# the launcher):
#
# - **the widest row** one block may hold: the original allows 64 KiB of
#   data, $65536 / \text{element size}$ elements; ours caps rows at
#   `MAX_N` = 16384 elements for every dtype, which keeps even an fp32 row
#   inside those 64 KiB. Wider rows are refused rather than looped over;
# - **warps**: $\min(\max(\text{BLOCK}/256, 1), 8)$;
# - **partial buffers** (`GROUP_SIZE_M`): 256 for rows up to 1024 wide, 128 up
#   to 4096, 96 up to 8192 and 64 beyond: narrow rows mean many short
#   programs, and more buffers mean less waiting at each lock;
# - **the lock array** holds $2\cdot$`GROUP_SIZE_M` integers: the locks
#   themselves, then the "has this buffer been written yet" counts;
# - **the autograd Function** returns one gradient per forward argument:
#   $(dx, d\gamma, d\beta)$ for the tensors and `None` for the non-tensor
#   arguments (the original's `normalized_shape` and `eps`; ours takes only
#   `eps`). Its kernels have no backward of their own, so ours refuses a
#   gradient of the gradient (`create_graph=True`) with a `RuntimeError`.
#
# It measured itself with `triton.testing.perf_report`, a decorator that takes
# a `triton.testing.Benchmark` (the swept argument and its values, the
# providers, the axis labels) and plots every provider against the sweep. The
# sweep was $M = 4096$ rows of fp16 with $N$ from 1024 to 15872 in steps of
# 512, against PyTorch and NVIDIA Apex's fused layer norm. It reported
# bandwidth as $2 \cdot \text{numel} \cdot \text{size} / t$ for the forward and
# $3 \cdot \text{numel} \cdot \text{size} / t$ for the backward, timed with
# `do_bench(..., rep=500, grad_to_none=[x])`: CUDA events around each call,
# after zeroing a 256 MB buffer to clear L2. `grad_to_none=[x]` reset only
# `x.grad` between repetitions, so the weight and bias gradients did
# accumulate (each call also added into $\gamma$'s and $\beta$'s `.grad`, a
# small extra read and write of $2N$ values). Its published table put the
# Triton backward well ahead of both, on a GPU it did not name: at
# $N = 4096$, $561.7$ GB/s against $220.9$ for PyTorch and $294.3$ for Apex.
# Without a named GPU and the same run's ceiling those figures say nothing
# about an H100; the [LayerNorm chapter's
# Performance](../../kernels/layer_norm/#performance) section sets them beside
# our own run of this design, and says what became of the ranking. Our own
# measurement is below, taken the way [Performance](../../performance/)
# describes.
#
# ## What this version leaves on the table
#
# Each program handles one row, so for narrow rows the programs are short and
# the locks are busy; the whole row must fit in registers; and the result of
# $d\gamma$ depends on the order in which programs took the locks, so it is not
# bit-reproducible. The [LayerNorm](../../kernels/layer_norm/) chapter starts
# from here and builds the fast version: no locks, no atomics, partial rows
# summed in a fixed order.
#
# ## Measured on a GPU
#
# `examples/layer_norm_locks/bench.py`: bf16, $M = 4096$, $N$ from 1024 to
# 16384, forward and forward+backward, against PyTorch eager `F.layer_norm`
# and `torch.compile` of it. Bandwidth counts the $M\times N$ tensors only
# (2 passes forward, 3 more backward).

# %%
bench_table("layer_norm_locks")

# %% [markdown]
# Reading the table: the forward (one row per program, one read and one
# write) beats eager PyTorch at every width. The forward+backward does not:
# it trails eager and `torch.compile` everywhere, because programs queue at
# the `GROUP_SIZE_M` locks and a second kernel re-reads every partial buffer.
# That is the cost this design pays for its simplicity, and the reason the
# deep-dive replaces the locks.
#
# ## Exercises
#
# **1. RMSNorm's backward.** RMSNorm drops the centring:
# $y = \gamma\odot x/r$, $r = \sqrt{\overline{x^2} + \varepsilon}$. Derive $dx$
# by the same route.

# %%
answer("examples/layer_norm_locks/exercises.py:rms_norm_vjp")

# %% [markdown]
# With $\hat x = x/r$, $\partial r/\partial x_k = \hat x_k/N$, so
# $\partial \hat x/\partial x = \frac1r(I - \frac1N\hat x\hat x^\top)$: the
# $\mathbf 1\mathbf 1^\top$ term is gone, and
# $dx = \frac1r(g - \overline{g\odot\hat x}\,\hat x)$. Tested against autograd
# in `tests/layer_norm_locks/test_exercises.py`.
#
# **2. Where else must the barrier go?** The kernel releases the lock after a
# barrier. Is there a second place where threads of the same program must wait
# for each other around the lock?
#
# <details class="success"><summary>Answer</summary>
#
# After the acquire: no thread may load the buffer before the lock is
# held. Triton already orders this: every thread needs the result of
# `atomic_cas` to leave the `while` loop, so the value is broadcast to all
# threads (through shared memory, with a barrier) before any of them
# continues.
#
# </details>
#
# **3. A lock-free alternative.** Give each block of rows its own partial row
# of a $\lceil M/B\rceil \times N$ buffer, as the backward-pass tutorial does.
# What do you gain and lose?
#
# <details class="success"><summary>Answer</summary>
#
# No locks, no spinning, and a bit-reproducible $d\gamma$ (the second stage
# sums in a fixed order). The buffer is larger ($\lceil M/B\rceil$ rows
# instead of `GROUP_SIZE_M`), so the second stage reads more, unless each
# program handles many rows ($B$ large), which is what the fast version does.
#
# </details>
