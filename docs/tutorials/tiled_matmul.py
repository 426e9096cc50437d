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
# # Tiling: matrix multiplication
#
# Element-wise kernels and reductions touch each value once, so memory
# bandwidth bounds them however clever the kernel. Matrix multiplication is
# different: every input value is used many times, and *how* a kernel arranges
# that reuse decides whether it waits on memory or keeps the tensor cores busy.
# This tutorial builds the classic answer, the **tiled** matmul, one idea at a
# time:
#
# 1. why the naive kernel is memory-bound (arithmetic intensity);
# 2. tiles and the loop over K;
# 3. masks for ragged edges, and strides counted in elements;
# 4. the order in which programs visit tiles, and why it matters for L2;
# 5. a fused epilogue (ReLU, leaky ReLU);
# 6. the TF32 trap when you compare fp32 results.
#
# Everything runs here on the CPU through Triton's interpreter, on small
# matrices. The kernel is `examples/tiled_matmul/kernel.py`; a later deep-dive
# chapter chases cuBLAS speed, while this one stays the clear version.

# %%
import academy  # first: on a CPU it switches Triton to the interpreter before any kernel exists
from academy.site.notebook import answer, bench_plot, bench_table, show

import torch
import triton
from IPython.display import HTML

from examples.tiled_matmul.kernel import (
    grouping_svg,
    kernel_tile_map,
    matmul,
    panels_read,
    tile_coordinates,
    to_tf32,
)

torch.manual_seed(0)
print("device:", academy.DEVICE, "| interpreted:", academy.INTERPRETED)

# %% [markdown]
# ## 1. Arithmetic intensity: why the naive kernel starves
#
# $C = AB$ with $A$ of shape $M \times K$ and $B$ of shape $K \times N$ costs
# $2MNK$ floating-point operations: each of the $MN$ outputs is a dot product
# of length $K$, one multiply and one add per term.
#
# The **arithmetic intensity** of a kernel is the work it does per byte it
# moves from memory, $I = \text{FLOPs} / \text{bytes}$. A GPU does hundreds
# of FLOPs in the time it reads one byte from HBM, so a kernel with small $I$
# leaves the arithmetic units idle, waiting for data.
#
# **Naive**: one program per output $c_{ij}$ reads row $i$ of $A$ and column
# $j$ of $B$, that is $2K$ values of $s$ bytes each, to do $2K$ FLOPs:
#
# $$I_\text{naive} = \frac{2K}{2K\,s} = \frac{1}{s},$$
#
# a constant: half a FLOP per byte in fp16, whatever the size. Every value of
# $A$ is fetched $N$ times and every value of $B$ $M$ times.
#
# **Tiled**: one program computes a $B_M \times B_N$ tile of $C$. It reads a
# $B_M \times K$ panel of $A$ and a $K \times B_N$ panel of $B$, and does
# $2 B_M B_N K$ FLOPs on them:
#
# $$I_\text{tile} = \frac{2 B_M B_N K}{(B_M + B_N) K\, s} = \frac{2 B_M B_N}{(B_M + B_N)\, s}
# \;\overset{B_M = B_N = B}{=}\; \frac{B}{s}.$$
#
# The intensity now grows with the tile: each loaded value of $A$ is used
# $B_N$ times, each value of $B$ $B_M$ times. The tile size is bounded by what
# fits on chip (registers for the accumulator, shared memory for the operand
# tiles), which is why it is a meta-parameter
# ([tutorial 11](../autotuning/) searches it). The whole problem cannot beat
# reading each input once and writing $C$ once:
#
# $$I_\text{max} = \frac{2MNK}{(MK + KN + MN)\, s}.$$

# %%
s = 2  # bytes per fp16 value
print("tile B    intensity B/s (FLOP/byte, fp16)")
for b in (1, 16, 32, 64, 128, 256):
    print(f"{b:6d}    {2 * b * b / ((b + b) * s):8.1f}")
n = 4096
print(f"\nwhole {n}³ problem, each value moved once: {2 * n**3 / ((3 * n * n) * s):.0f} FLOP/byte")

# %% [markdown]
# A tile size of 1 is the naive kernel. A 128×128 tile does 64 FLOPs per
# byte of fp16 it loads: well on the way to keeping tensor cores fed, with the
# rest of the reuse left to the L2 cache (section 4).
#
# ## 2. The kernel: tiles and the K loop
#
# A **program** owns one tile of $C$. It cannot hold whole panels of $A$ and
# $B$ ($K$ can be in the thousands), so it walks along $K$ in steps of
# $B_K$: load a $B_M \times B_K$ tile of $A$ and a $B_K \times B_N$ tile of $B$,
# multiply them with `tl.dot` and add the product into an fp32 accumulator,
#
# $$C_{\text{tile}} = \sum_{k_0 = 0,\, B_K,\, 2B_K, \dots} A[\text{rows}, k_0 : k_0 + B_K]\;
# B[k_0 : k_0 + B_K, \text{cols}].$$
#
# On a GPU the compiler stages those operand tiles through shared memory and
# overlaps the loads of step $k_0 + B_K$ with the math of step $k_0$
# (`num_stages` sets how many steps are in flight). Here is the kernel:

# %%
show("examples/tiled_matmul/kernel.py:matmul_kernel")

# %% [markdown]
# The numbered comments:
#
# 1. Which tile this program computes. With `GROUP_SIZE_M = 1` this is plain
#    row-major order; section 4 explains the grouped order.
# 2. Pointers to the first $B_M \times B_K$ tile of $A$: a column of row
#    offsets plus a row of K offsets broadcast into a 2-D block. Rows are
#    wrapped with `% M` (section 3).
# 3. The accumulator is fp32 whatever the input dtype: fp16 sums of
#    thousands of terms lose digits fast.
# 4. The K loop. `range(0, K, BLOCK_K)` steps through $K$; the last step may
#    be partial.
# 5. The K mask: columns of the $A$ tile (rows of the $B$ tile) past the end
#    of $K$ are not read, and `other=0.0` makes them contribute nothing to the
#    dot product.
# 6. `tl.dot` multiplies the two tiles and adds into `acc`: on the tensor
#    cores for fp16/bf16 (and for fp32 as TF32; `"ieee"` fp32 runs on the
#    FP32 units). Triton 3.6 asks only that $B_K$ be at least 16 (newer
#    releases accept 8 for fp32) and pads small $B_M$, $B_N$; this launcher
#    asks for powers of two of at least 16 in every dimension. Under the
#    interpreter, whose bf16 arithmetic is wrong, `UPCAST` converts both
#    tiles to fp32 first, as the matmul chapter's kernels do.
# 7. Move both pointer blocks one step along K: `BLOCK_K` times the stride of
#    the K dimension, in elements.
# 8. The epilogue, applied while the tile is still in registers (section 5).
# 9. The store mask: rows and columns past the edge of $C$ are not written.
#
# The launcher validates and launches: one program per tile, on a 1-D grid.

# %%
show("examples/tiled_matmul/kernel.py:launcher")

# %% [markdown]
# Notes on the launcher:
#
# 1. Offsets are computed in int32. Rather than silently overflow, the
#    launcher refuses an operand whose largest element offset passes
#    $2^{31} - 1$ (and, a few lines down, an output of more than
#    $2^{31} - 1$ elements).
# 2. A 1-D grid: the kernel turns its program id into a tile itself, which is
#    what lets it choose the order.
# 3. Strides are passed for every operand, so transposed and sliced inputs
#    work without a copy (section 3).
#
# There is no backward: with autograd recording, an operand that requires
# grad is refused rather than given a result without gradients.
#
# Run it on a small, ragged problem with 16×16×16 tiles and compare with a
# float64 product:

# %%
M, N, K = 50, 40, 70
a = torch.randn(M, K, device=academy.DEVICE)
b = torch.randn(K, N, device=academy.DEVICE)
tiles = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}

c = matmul(a, b, config=tiles)
exact = a.double() @ b.double()
print(f"{triton.cdiv(M, 16) * triton.cdiv(N, 16)} programs, {triton.cdiv(K, 16)} K steps each")
print(f"relative error vs float64: {((c.double() - exact).norm() / exact.norm()).item():.1e}")

# %% [markdown]
# ## 3. Ragged edges and strides
#
# ### The K mask
#
# Take $K = 10$ and $B_K = 4$. The loop makes three steps, at $k_0 = 0, 4, 8$;
# only 2 of the 4 columns of the last step exist. The mask
# `ks < K - k_start` switches off the rest. For a 2-row tile of $A$ the
# masks are:

# %%
K_small, BLOCK_K = 10, 4
ks = torch.arange(BLOCK_K)
for k_start in range(0, K_small, BLOCK_K):
    a_mask = (ks[None, :] < K_small - k_start).expand(2, BLOCK_K)  # rows of the A tile
    b_mask = (ks[:, None] < K_small - k_start).expand(BLOCK_K, 2)  # columns of the B tile
    print(f"k_start={k_start}: A columns {(k_start + ks).tolist()}, a_mask\n{a_mask.int()}")
    print(f"           b_mask (B rows)\n{b_mask.int()}")

# %% [markdown]
# ### Rows and columns past the edge: wrap, then mask the store
#
# The last tile of rows can run past $M$ too. The kernel does not mask those
# loads; it wraps the row index with `% M`, so the extra rows re-read real
# rows of $A$ (always in bounds, so the loads need no row mask), and the
# garbage they produce lands in rows of the tile that the store mask throws
# away. With $M = 10$ and $B_M = 4$:

# %%
M_small, BLOCK_M = 10, 4
for pid_m in range(triton.cdiv(M_small, BLOCK_M)):
    rows = pid_m * BLOCK_M + torch.arange(BLOCK_M)
    print(
        f"tile {pid_m}: rows {rows.tolist()} -> loads rows {(rows % M_small).tolist()}, "
        f"stores {(rows < M_small).int().tolist()}"
    )

# %% [markdown]
# The test suite runs shapes such as $33 \times 47 \times 70$ with outputs
# filled with NaN before the launch, so a missing store mask or a forgotten
# tile shows up at once (the interpreter does not report out-of-bounds
# accesses, so that is how such bugs are caught on a CPU).
#
# ### Strides are in elements
#
# A 2-D tensor is a flat buffer plus two strides: element $(i, j)$ lives at
# offset $i \cdot \text{stride}_0 + j \cdot \text{stride}_1$, counted in
# elements, not bytes (Triton scales by the element size when it adds an
# offset to a typed pointer). A transpose swaps the strides; a slice
# multiplies them. The kernel takes both strides of every operand, so it
# never needs a contiguous copy:

# %%
base = torch.randn(6, 8, device=academy.DEVICE)
for name, t in [("contiguous", base), ("transposed", base.t()), ("every other column", base[:, ::2])]:
    i, j = 1, 2
    offset = i * t.stride(0) + j * t.stride(1) + t.storage_offset()
    print(
        f"{name:19s} shape {tuple(t.shape)} strides {t.stride()}: "
        f"element (1, 2) at offset {offset} -> {base.flatten()[offset].item():+.4f} == {t[i, j].item():+.4f}"
    )

a_t = torch.randn(K, M, device=academy.DEVICE).t()  # an (M, K) view with strides (1, M)
c = matmul(a_t, b, config=tiles)
exact = a_t.double() @ b.double()
print(f"\ntransposed A: relative error {((c.double() - exact).norm() / exact.norm()).item():.1e}")

# %% [markdown]
# ## 4. Program order and the L2 cache
#
# Tiles are independent, so *any* order of programs gives the same $C$. But
# programs run a **wave** at a time (as many as fit on the GPU's SMs), and
# programs of one wave that read the same panel of $A$ or $B$ share it through
# the L2 cache: the first one pays for the trip to HBM, the others hit.
#
# Row-major order (program $p$ gets tile row $\lfloor p / n \rfloor$, column
# $p \bmod n$, with $n$ tiles per row) sweeps across a whole row of tiles before
# moving down: a wave reads few panels of $A$ but *every* panel of $B$.
# **Grouped** order deals programs out a group of `GROUP_SIZE_M` tile rows at
# a time and goes down a column within the group first, so a wave covers a
# squarer block of tiles and reads fewer panels in total.
#
# The mapping, in plain Python (the kernel's `grouped_tile` is the same code
# line for line, with `tl.minimum`):

# %%
show("examples/tiled_matmul/kernel.py:tile_coordinates_py")

# %% [markdown]
# ### The worked example
#
# $M = 16$, $N = 8$, $K = 16$ with $2 \times 2$ tiles: $C$ has
# $8 \times 4$ tiles, so 32 programs. With `GROUP_SIZE_M = 3` a group is 3
# tile rows × 4 tile columns = 12 programs: programs 0–11 cover rows 0–2,
# 12–23 rows 3–5, and the last group (24–31) has only the 2 rows left, 6–7.
# Inside a group, consecutive programs go down a column:

# %%
num_pid_m, num_pid_n, group = 16 // 2, 8 // 2, 3
python_map = [tile_coordinates(pid, num_pid_m, num_pid_n, group) for pid in range(num_pid_m * num_pid_n)]
print(" pid  group  first_row  rows_in_group  ->  (pid_m, pid_n)")
for pid, (pid_m, pid_n) in enumerate(python_map):
    g = pid // (group * num_pid_n)
    print(f"{pid:4d}  {g:5d}  {g * group:9d}  {min(num_pid_m - g * group, group):13d}  ->  ({pid_m}, {pid_n})")

# %% [markdown]
# The same map, read back from the kernel: a tiny kernel
# (`tile_map_kernel`) calls `grouped_tile` in every program and stores what
# it got.

# %%
assert kernel_tile_map(num_pid_m, num_pid_n, group) == python_map
print("the kernel's map equals the Python map: True")

# %% [markdown]
# The picture: $C$'s tiles labelled with the program that computes them.
# Say 6 programs run at once (shaded). The strips on the left are the panels
# of $A$ (one per tile row), those on top the panels of $B$ (one per tile
# column); the shaded ones are what the wave reads.

# %%
wave = 6
HTML(
    "<div style='display:flex;gap:2em;flex-wrap:wrap'>"
    + grouping_svg(num_pid_m, num_pid_n, 1, wave, title="row-major")
    + grouping_svg(num_pid_m, num_pid_n, 3, wave, title="GROUP_SIZE_M = 3")
    + "</div>"
)

# %% [markdown]
# Row-major: the wave reads 2 panels of $A$ and all 4 of $B$. Grouped: 3 of
# $A$ and 2 of $B$: one fewer panel for the same work. At realistic sizes
# the gap is large. An $8192^3$ product in $128 \times 128$ tiles has a
# $64 \times 64$ grid of tiles; with a wave of 132 programs (one per SM on an
# H100):

# %%
for g in (1, 4, 8, 16):
    rows_read, cols_read = panels_read(64, 64, g, 132)
    print(
        f"GROUP_SIZE_M = {g:2d}: {rows_read:2d} A panels + {cols_read:2d} B panels = {rows_read + cols_read} panels per wave"
    )

# %% [markdown]
# Each panel is $128 \times 8192$ fp16 values, 2 MiB: row-major order asks L2
# for 67 panels per wave, grouped order for 25. Whether that changes the
# speed depends on the L2 size and on how the hardware actually schedules
# programs, which is what the benchmark below measures: the same kernel in
# both orders.
#
# ## 5. A fused epilogue
#
# A matmul is often followed by an activation. Applied by PyTorch afterwards,
# it costs one more trip through memory: read $C$, write $C$ again. Applied
# in the kernel, between the K loop and the store, it is free: the tile is in
# registers anyway. `ACTIVATION` is a `tl.constexpr`, so each choice compiles
# to its own kernel with no branch at run time. Leaky ReLU is
#
# $$\operatorname{leaky}(x) = \begin{cases} x & x \ge 0 \\ 0.01\,x & x < 0 \end{cases}$$

# %%
a16 = torch.randn(48, 64, device=academy.DEVICE, dtype=torch.float16)
b16 = torch.randn(64, 32, device=academy.DEVICE, dtype=torch.float16)
for activation in ("relu", "leaky_relu"):
    c = matmul(a16, b16, activation=activation, config=tiles)
    exact = a16.double() @ b16.double()
    exact = torch.relu(exact) if activation == "relu" else torch.nn.functional.leaky_relu(exact, 0.01)
    print(
        f"{activation:10s}: min {c.min().item():+.3f}, relative error {((c.double() - exact).norm() / exact.norm()).item():.1e}"
    )

# %% [markdown]
# ## 6. The TF32 trap
#
# On a GPU, `tl.dot` on fp32 inputs defaults to **TF32**: it rounds both
# inputs to 10 mantissa bits (fp32 has 23) so the tensor cores can multiply
# them, and accumulates in fp32. That is several times faster than true fp32,
# and nearly four decimal digits less precise per input ($2^{13}$ coarser).
# A test that compares an fp32
# kernel with `torch.matmul` (which does *not* use TF32 by default) at an fp32
# tolerance then fails on the GPU and passes on the CPU, where the
# interpreter multiplies in full fp32.
#
# We can see the size of the effect without a GPU by emulating TF32: round
# the fp32 inputs to 10 mantissa bits, then multiply exactly.

# %%
show("examples/tiled_matmul/kernel.py:tf32")

# %%
x = torch.randn(256, 256)
y = torch.randn(256, 256)
exact = x.double() @ y.double()


def rel_error(approx):
    return ((approx.double() - exact).norm() / exact.norm()).item()


print(f"fp32 inputs, fp32 products          {rel_error(x @ y):.1e}")
print(f"TF32 inputs (round to nearest)      {rel_error(to_tf32(x).double() @ to_tf32(y).double()):.1e}")
print(
    f"TF32 inputs (truncated)             {rel_error(to_tf32(x, 'truncate').double() @ to_tf32(y, 'truncate').double()):.1e}"
)
print(f"fp16 inputs                         {rel_error(x.half().double() @ y.half().double()):.1e}")
print("fp32 tolerance in this handbook      1.0e-05")

# %% [markdown]
# Rounding to TF32 costs a relative error of a few times $10^{-4}$, thirty to
# eighty times the fp32 tolerance; truncating costs two to three times as much as
# rounding to nearest. TF32 keeps fp16's 10 mantissa bits (with fp32's
# exponent range), so its inputs carry the same rounding error as fp16
# inputs. Two honest ways out:
#
# - ask for true fp32 products: `tl.dot(..., input_precision="ieee")`. This
#   kernel's launcher does that by default (`matmul(..., input_precision="ieee")`),
#   so fp32 means fp32, as in `torch.matmul`;
# - or keep TF32 for speed (`input_precision="tf32"`) and judge the result by
#   TF32's own error. The tests hold TF32 results to 1.5 times the error of
#   the truncating emulation above, and check that the result is *not* as
#   exact as fp32, so they notice if the precision setting stops taking effect.
#
# ## Performance
#
# The benchmark (`examples/tiled_matmul/bench.py`) times three providers on
# fp16 and bf16 inputs: this kernel in grouped order (`GROUP_SIZE_M = 8`), the
# same kernel in row-major order (`GROUP_SIZE_M = 1`), and cuBLAS through
# `torch.matmul`. The work is $2MNK$ FLOPs per call, reported in TFLOP/s and
# as a fraction of a large bf16 `torch.matmul` measured in the same run.

# %%
bench_table("tiled_matmul")

# %%
bench_plot("tiled_matmul", sweep="square", mode="fwd", dtype="bfloat16")

# %% [markdown]
# What grouping bought, read from the table: a few percent at most on this
# GPU. The grouped order is the faster at 2048 (1.05× in fp16, 1.06× in
# bf16), at 8192 (1.04× and 1.03×) and at 4096 in fp16 (1.03×); at 4096 in
# bf16 the two orders are level, and at 6144 they are within 1% in both
# dtypes. On the tall shape row-major is the faster, by 1.02× in fp16 and
# 1.01× in bf16: likely because the 132 tiles in flight at once walk K at
# about the same pace, so the panels they share are still in the 50 MB L2
# when the next tile asks for them, whichever order the tiles were issued
# in. At 1024 the $8 \times 8$ grid of 64 tiles runs in a single wave on 132
# SMs, so no order reads fewer panels: the two orders are within 0.5% of
# each other in fp16, while in bf16 row-major reads 1.02× faster, a gap the
# panel count does not explain. cuBLAS stays ahead of this teaching kernel
# at every size and in both dtypes, by 1.04× (fp16 at 2048) to 1.35× (bf16
# at 1024): closing that gap (persistent kernels, TMA copies, per-shape tile
# tables) is the job of the matmul chapter, not of this tutorial, whose
# kernel already pipelines its K loop (`num_stages=3`).

# %% [markdown]
# ## Exercises
#
# **1. Bias in the epilogue.** A linear layer computes $\operatorname{act}(xW + b)$
# with one bias value per output column. Write `linear_bias_act(x, w, bias,
# activation)` that adds the bias in the epilogue, so $C$ is written once.

# %%
answer("examples/tiled_matmul/exercises.py:linear_bias_act")

# %% [markdown]
# **2. A batch of matrices.** Write `batched_matmul(a, b)` for stacks of
# shape $(B, M, K)$ and $(B, K, N)$ in one launch. Hint: a second grid axis
# can pick the matrix; each operand then needs a batch stride.

# %%
answer("examples/tiled_matmul/exercises.py:batched_matmul")

# %% [markdown]
# **3. The best group size.** For the $64 \times 64$ grid of tiles above and a
# wave of 132 programs, which `GROUP_SIZE_M` reads the fewest panels per wave?
# Estimate it first: a wave covering a $g \times (132/g)$ block reads about
# $g + 132/g$ panels.
#
# <details class="success"><summary>Answer</summary>
#
# $g + 132/g$ is smallest at $g = \sqrt{132} \approx 11.5$, and the exact count
# agrees: `GROUP_SIZE_M` of 11 or 12 reads 23 panels, against 25 for 8 and 67
# for row-major order. The curve is flat near its minimum, which is why a
# round 8 is the usual choice: the last few panels matter far less than the
# first forty.
#
# </details>

# %%
counts = {g: sum(panels_read(64, 64, g, 132)) for g in range(1, 65)}
best = min(counts.values())
print("fewest panels:", best, "with GROUP_SIZE_M in", [g for g, n in counts.items() if n == best])
print("GROUP_SIZE_M = 8:", counts[8], "| row-major:", counts[1])
assert best == 23 and counts[8] == 25 and counts[1] == 67

# %% [markdown]
# The answers run as tests in `tests/tiled_matmul/test_exercises.py`.
# Next: [meta-parameters and autotuning](../autotuning/) picks the tile shape,
# warps and pipeline depth by measurement instead of by hand.
