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
# # Reductions: a row sum of any width
#
# A reduction turns many values into one: a sum, a maximum, a norm. The
# simplest useful one is the sum of each row of a matrix,
# $s_i = \sum_{j} x_{ij}$. In the [fused softmax](../../kernels/fused_softmax/)
# chapter a whole row is loaded as one block and reduced with one `tl.sum`.
# That works while the row fits. This tutorial handles rows of any width,
# with a loop over tiles, a per-lane accumulator and one final `tl.sum`, and
# then points to the softmax kernels built the same way.

# %%

import academy
from academy.site.notebook import answer, bench_plot, bench_table, show

import numpy as np
import torch

from examples.row_sum.kernel import launch_config, row_sum

# %% [markdown]
# ## Why a wide row cannot be one block
#
# A Triton block lives in registers: `tl.arange(0, BLOCK_N)` spreads
# `BLOCK_N` values over the `32 · num_warps` threads of one program, and every
# value needs a register. An H100 SM has 65,536 32-bit registers (256 KiB) for
# all the programs it runs, and one thread may use at most 255. A row of
# 262,144 fp32 values is 1 MiB, four times the register file of the whole SM.
# The compiler would spill the block to local memory (slow, and it defeats the
# point of loading once), and Triton refuses blocks of more than $2^{20}$
# elements anyway. Even well below those limits, a huge block leaves room for
# only one program per SM, with nothing to hide memory latency.
#
# So the block size has to be capped, and a program has to walk along its row
# one **tile** at a time. Our cap is `MAX_BLOCK_N = 4096` values per tile:

# %%
for n_cols in (100, 3000, 4096, 262144):
    config = launch_config(n_cols)
    tiles = -(-n_cols // config["BLOCK_N"])
    print(
        f"N = {n_cols:>6}: BLOCK_N = {config['BLOCK_N']:>4}, num_warps = {config['num_warps']}, "
        f"{tiles:>2} tile(s) per row"
    )

# %% [markdown]
# ## The tile loop
#
# One program per row. It keeps a vector of `BLOCK_N` partial sums in fp32,
# one per lane, adds each tile into it element by element, and reduces the
# vector to one number only after the loop:

# %%
show("examples/row_sum/kernel.py:kernel")

# %% [markdown]
# - `program_id` becomes int64 before it multiplies the row stride: in int32
#   the product wraps once a row starts $2^{31}$ elements or more into the
#   tensor, which rows of 262,144 values reach at row 8192 (the benchmark's
#   4096 such rows stop at $2^{30}$).
# - `partial` is the per-lane accumulator: `BLOCK_N` fp32 values, whatever the
#   input dtype.
# - The loop bound `n_cols` is a run-time value, so one compiled kernel serves
#   every width.
# - The last tile usually runs past the end of the row. Masked lanes read
#   `other=0.0`, the identity of addition, so they add nothing.
# - Each lane adds its own element: `BLOCK_N` independent additions, no
#   communication between threads inside the loop.
# - After the loop, `tl.sum` reduces the lanes once, as a tree.
#
# Here is the same computation by hand for one row of 10 values and a tile of
# 4, so you can watch the lanes fill:

# %%
row = torch.arange(1.0, 11.0)  # 1, 2, ..., 10
block_n = 4
partial = torch.zeros(block_n)
for start in range(0, row.numel(), block_n):
    cols = start + torch.arange(block_n)
    tile = torch.where(cols < row.numel(), row[cols.clamp(max=row.numel() - 1)], 0.0)
    partial += tile
    print(f"tile at {start}: loaded {tile.tolist()}, partial sums {partial.tolist()}")
print("tl.sum(partial) =", partial.sum().item(), "  expected", row.sum().item())

# %% [markdown]
# And the kernel itself, on rows wide enough to loop (three tiles of 4096):

# %%
torch.manual_seed(0)
x = torch.randn(3, 10_000, device=academy.DEVICE) + 0.5
out = row_sum(x)
error = ((out - x.double().sum(-1)).norm() / x.double().sum(-1).norm()).item()
print("row sums:", out.tolist())
print(f"relative error against float64: {error:.1e}")

# %% [markdown]
# The launcher checks its input (a 2-D fp32/fp16/bf16 tensor whose columns
# are adjacent in memory; rows may have any stride; not one that requires
# grad, since there is no backward), handles the empty cases and launches one
# program per row:

# %%
show("examples/row_sum/kernel.py:launcher")

# %% [markdown]
# ## Per-lane or scalar accumulator?
#
# The loop could instead reduce each tile right away and keep one number:
# `acc += tl.sum(x)`. Both read the same bytes; they differ in two ways.
#
# **Parallelism.** `tl.sum` over a block held by several warps is a tree: warp
# shuffles inside each warp, then partial results through shared memory and a
# barrier across warps. With a scalar accumulator that happens in *every*
# iteration, between one tile's loads and the next tile's addition. With a
# per-lane accumulator the loop body is plain register additions, the loads of
# the next tile can be issued while this one is being added, and the tree runs
# once per row. A memory-bound kernel mostly waits for loads anyway, so the
# difference is in how well that wait is hidden, not in arithmetic.
#
# **Precision.** Both are far better than the loop a CPU programmer writes
# first, one element at a time into one accumulator. In that chain the running
# total grows to the size of the whole sum, and each addition rounds at that
# magnitude: the error grows with $N$. Splitting the row over `BLOCK_N` lanes
# makes each chain `BLOCK_N` times shorter and its total `BLOCK_N` times
# smaller, and the final tree adds only $\log_2 \mathtt{BLOCK\_N}$ levels.
# NumPy can reproduce the three orders exactly in fp32 (`np.cumsum` adds
# strictly in sequence):

# %%
rng = np.random.default_rng(0)
values = rng.random(2**20, dtype=np.float32)  # a million values in [0, 1): the sum is ~5e5
exact = values.astype(np.float64).sum()
lanes = 4096

one_chain = np.cumsum(values)[-1]  # one accumulator, a million additions in a row
per_lane = np.cumsum(values.reshape(-1, lanes), axis=0)[-1]  # 4096 chains of 256
tree = per_lane
while tree.size > 1:  # tl.sum: pairwise, log2(4096) = 12 levels
    tree = tree[0::2] + tree[1::2]
per_tile = np.float32(0)  # acc += tl.sum(tile): a tree per tile, then a chain of 256 tile sums
for tile in values.reshape(-1, lanes):
    t = tile
    while t.size > 1:
        t = t[0::2] + t[1::2]
    per_tile = np.float32(per_tile + t[0])

for label, total in (
    ("one scalar chain", one_chain),
    ("tile sums into a scalar", per_tile),
    ("per-lane, then tree", tree[0]),
):
    print(f"{label:>24}: relative error {abs(float(total) - exact) / exact:.1e}")

# %% [markdown]
# Both tiled orders land within a few fp32 roundings of the exact sum (the
# per-lane order a little closer: its chains carry smaller totals); the single
# chain is about a hundred times worse. What matters just as much is the accumulator's **type**.
# bf16 keeps 8 significant bits, so once a bf16 total reaches 256, adding 1
# changes nothing: the exact result 257 is halfway between the neighbours 256
# and 258 and rounds to the even one. That is why `partial` is fp32 even when
# `x` is bf16:

# %%
total = torch.tensor(0.0, dtype=torch.bfloat16)
for _ in range(1000):
    total += 1
print("1000 ones summed in bf16:", total.item())
print("row_sum of 1000 bf16 ones:", row_sum(torch.ones(1, 1000, dtype=torch.bfloat16, device=academy.DEVICE)).item())

# %% [markdown]
# ## From sums to softmax
#
# Softmax needs two reductions per row, a maximum $m$ (for stability) and a
# sum $\sum_j e^{x_j - m}$, and then a second pass to write
# $e^{x_j - m} / \sum$. The [fused softmax](../../kernels/fused_softmax/) chapter
# derives it and keeps rows of up to 32,768 values in one block. Its wider rows
# take an **online** kernel built from exactly the pattern of this page: a tile
# loop with per-lane accumulators and a final reduction. The twist is that the
# maximum is not known until the row ends, so each lane keeps a running
# maximum and a running sum, and whenever its maximum grows it rescales the sum
# it has so far by $e^{m_\text{old} - m_\text{new}}$. After the loop the lanes
# are combined the same way, each lane's sum rescaled to the row's maximum:

# %%
show("examples/fused_softmax/kernel.py:online_forward_kernel")

# %% [markdown]
# Compare it with `row_sum_kernel`: the same row pointer in int64, the same
# `for start in range(0, n_cols, BLOCK_N)`, per-lane state initialised to the
# identity of its operator ($-\infty$ for the maximum, 0 for the sum), masked
# lanes loaded as that identity, and one `tl.max` / `tl.sum` after the loop.
# The chapter's page has the derivation of the rescaling, its annotated walk
# through and its measurements.
#
# ## Measured on a GPU
#
# The benchmark (`examples/row_sum/bench.py`) sums 4096 rows of 1024 to
# 262,144 bf16 values and compares ours with PyTorch's `x.sum(-1)` (which also
# accumulates bf16 in fp32 and returns bf16) and with `torch.compile` of the
# same call. The minimal traffic is one read of the matrix plus the $M$ sums
# written, $(MN + M)\,b$ bytes.

# %%
bench_table("row_sum")

# %%
bench_plot("row_sum", sweep="M=4096", mode="fwd", dtype="bfloat16")

# %% [markdown]
# What to look for: at small $N$ each program has little to read, and 4096
# short programs are not enough to keep every SM's memory pipeline full; at
# large $N$ the loop runs long, and the kernel should approach the copy
# ceiling. The committed H100 table bears both out: the narrowest rows stay
# well below the ceiling, the widest reach it.
#
# ## Exercises
#
# **1. Row maximum.** Turn the row sum into `row_max(x)`. Which two values in
# the kernel must change besides the operator, and what goes wrong with a
# ragged row of negative numbers if you forget one of them?

# %%
answer("examples/row_sum/exercises.py:row_max")

# %% [markdown]
# The accumulator and the masked lanes both start at the identity of
# `maximum`, $-\infty$. With `other=0.0`, a row of negative numbers whose
# width is not a multiple of the tile would report a maximum of 0, a value
# that is not in the row. A maximum never rounds, so the answer's test demands
# exact equality with `x.amax(-1)`.
#
# **2. Root mean square.** RMSNorm divides each row by
# $\sqrt{\tfrac1N \sum_j x_j^2}$. Write `row_rms(x)`. Where must the
# conversion to fp32 happen for fp16 inputs of magnitude 300?

# %%
answer("examples/row_sum/exercises.py:row_rms")

# %% [markdown]
# Before squaring: $300^2 = 90{,}000$ is already larger than the largest fp16
# value, 65,504, so squaring in fp16 gives $\infty$. Converting right after the
# load keeps every square, and the sum of them, in fp32.
#
# Both answers are tested against float64 PyTorch, through one tile and
# through the tile loop, in `tests/row_sum/test_exercises.py`. Run once here:

# %%
from examples.row_sum.exercises import row_max, row_rms

x = torch.randn(4, 5000, device=academy.DEVICE) - 3.0
print("row_max equals x.amax(-1):", torch.equal(row_max(x), x.amax(-1)))
rms = x.double().pow(2).mean(-1).sqrt()
print(f"row_rms relative error: {((row_rms(x) - rms).norm() / rms.norm()).item():.1e}")

# %% [markdown]
# **3. Think about it.** With one program per row, how many programs run for
# $M = 4$ rows of $N = 10^7$ values on a GPU with 132 SMs, and what would you
# change?
#
# <details class="success"><summary>Answer</summary>
# <p>Four programs: four SMs busy, 128 idle, whatever the tile size. Split each
# row over several programs (a 2-D grid of rows × column chunks), let each
# write a partial sum, and add the partial sums in a second small kernel (or
# with <code>tl.atomic_add</code>, accepting a run-to-run order of additions
# that is not fixed).</p>
# </details>
