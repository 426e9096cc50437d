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
# # The GPU you are programming
#
# Triton hides threads, but not the hardware: block sizes, `num_warps`, and
# whether a kernel reaches the memory ceiling all come from a handful of
# facts about the chip. This page collects them, with small models you can
# run (all in `examples/gpu_model/`, tested in `tests/gpu_model/`), and
# ends with the roofline measured on our own GPU.
#
# ## The chips
#
# Spec-sheet numbers for the GPUs this handbook talks about. Every column
# names the documents it comes from; the "derived" rows are arithmetic on the
# rows above them (explained below). Measured numbers never appear here: they
# come from the benchmark results further down.

# %%
from IPython.display import HTML, Markdown

from examples.gpu_model.specs import GPUS, hardware_table_markdown

Markdown(hardware_table_markdown())

# %% [markdown]
# Read it from the bottom of the memory hierarchy up:
#
# - **HBM** (high-bandwidth memory) is the GPU's main memory: tens to
#   hundreds of GB, and the bandwidth every tensor you load or store pays.
# - **L2** is one cache shared by all SMs, tens of MB. A tensor that fits in
#   L2 is read again much faster than one that does not (L2 bandwidth is not
#   on the spec sheets; microbenchmarks put it at several times HBM's), which
#   is why our benchmarks rotate inputs larger than L2.
# - Each **SM** (streaming multiprocessor) has one block of on-chip SRAM used
#   as L1 cache and as **shared memory**, split by a configurable carve-out,
#   and a **register file** of 65,536 32-bit registers. Shared-memory
#   bandwidth is 32 banks × 4 bytes per clock per SM; the registers feed the
#   arithmetic units three operands per fused multiply-add. Those two rows
#   are derived from the boost clock; where the cited documents give no clock
#   (B200) we print nothing rather than guess, and the figures for it that
#   circulate in lecture notes disagree with each other for that reason.
#   A university lecture on GPU kernels (`lecture_06.py`), for instance,
#   lists register bandwidth of about $116$, $401$ and $447$ TB/s and
#   shared-memory bandwidth of about $19$, $33$ and $19$ TB/s for A100, H100
#   and B200. The first two
#   columns match the derivation here. The B200's shared-memory figure
#   cannot: with 148 SMs of 32 four-byte banks, $19$ TB/s would mean a
#   clock of $19 \times 10^{12} / (148 \cdot 128) \approx 1.0$ GHz, while
#   its register figure implies nearly twice that. Its L2 figures (about
#   $5$–$8$, $12$ and $9$ TB/s) are microbenchmark estimates, not spec-sheet
#   values, which is why the table above leaves L2 bandwidth out.
# - Blackwell adds **tensor memory** (TMEM), 256 KB per SM that holds
#   tensor-core accumulators, so a matmul's running sums no longer occupy
#   registers.
#
# ## The programming model: threads, blocks, grid
#
# CUDA groups work in three levels. A **thread** runs the kernel body with
# its own registers. A **thread block** (a CTA, cooperative thread array) is
# up to 1,024 threads that run on *one* SM, together, and can share that
# SM's shared memory and wait for each other at barriers. That is why blocks
# exist: cooperation is cheap inside an SM and expensive across SMs. The
# **grid** is all the blocks of one launch; the hardware hands blocks to SMs
# as room frees up, in no promised order, so blocks cannot wait for each
# other. Hopper added a level between block and grid, the **thread-block
# cluster**: up to 8 blocks (16 with an opt-in) scheduled at once on nearby
# SMs, which can read and write each other's shared memory (*distributed
# shared memory*). What that buys is cooperation between neighbouring blocks
# without a round trip through L2: a reduction split over several blocks can
# exchange its partial results on chip, and one tile that several blocks
# need can be fetched once and delivered to all of them (TMA multicast).
# CUDA and CUTLASS program clusters directly. Triton exposes less: a
# `triton.Config` (or a launch) can ask for `num_ctas` blocks per cluster on
# Hopper and later, but `triton.language` has no operation that reads
# another program's shared memory, so a Triton kernel never addresses
# distributed shared memory itself.
#
# A Triton program is one thread block; `tl.program_id` is the block's index
# in the grid, and `num_warps` sets its size in warps.
#
# ## Warps: 32 threads in lockstep
#
# An SM does not schedule threads one by one: it schedules **warps** of 32
# threads that issue the same instruction together (SIMT: single
# instruction, multiple threads). When the threads of a warp disagree at a
# branch, that is **divergence**: the warp runs the taken side with the other
# threads masked off, then the other side, so a divergent `if/else` costs
# both paths. (Since Volta, threads have their own program counters and can
# reconverge more flexibly, but a warp still executes one path at a time.)
# Triton's masks are the friendly version of this: every lane runs the same
# instructions and the mask just switches stores and loads off.
#
# Each SM keeps many warps **resident** at once, their registers all live in
# the register file, so switching from a warp that waits on memory to one
# that is ready costs nothing: no state is saved or restored. This is how a
# GPU hides memory latency: not with big caches, but with enough resident
# warps that some are always ready to issue.
#
# ## Registers and occupancy
#
# **Occupancy** is the fraction of the SM's warp slots (64 on all four GPUs)
# that a kernel fills. What limits it is whichever resource runs out first:
#
# $$\text{blocks per SM} = \min\left(\left\lfloor\frac{64}{W}\right\rfloor,\;
#   32,\;
#   \left\lfloor\frac{\lfloor 65536 / R_w \rfloor}{W}\right\rfloor,\;
#   \left\lfloor\frac{S_{\max}}{S_b}\right\rfloor\right)$$
#
# with $W$ warps per block, $R_w$ registers per warp (registers per thread
# × 32, rounded up to a multiple of 256), and $S_b$ the block's shared memory
# plus 1 KB the system reserves, out of $S_{\max}$ per SM. A thread may use
# up to 255 registers; but a full SM has $64 \times 32 = 2048$ threads
# sharing 65,536 registers, so only kernels at $65536 / 2048 = 32$ registers
# per thread or fewer can fill it. Each doubling past that halves the
# resident warps:

# %%
from examples.gpu_model.occupancy import occupancy

print("registers/thread  warps/SM  occupancy  limited by")
for registers in (32, 64, 96, 128, 168, 255):
    occ = occupancy(registers, threads_per_block=256, shared_mem_per_block=0, gpu="H100")
    print(f"{registers:16d}  {occ.warps_per_sm:8d}  {occ.fraction:9.0%}  {occ.limiter}")

# %% [markdown]
# Change the numbers and run it again: this is the whole calculator. Shared
# memory limits too; a matmul that stages 96 KB of tiles per block fits two
# blocks on an H100 (228 KB per SM) but one on an A100 (164 KB):

# %%
for gpu in ("A100", "H100"):
    occ = occupancy(64, 256, shared_mem_per_block=96 * 1024, gpu=gpu)
    print(f"{gpu}: {occ.blocks_per_sm} block(s), {occ.fraction:.0%} occupancy, limited by {occ.limiter}; {occ.limits}")

# %% [markdown]
# Low occupancy is not automatically slow. A kernel with enough independent
# work per thread (several loads in flight, a tile of accumulators) hides
# latency with fewer warps: that is **thread coarsening**, giving each thread
# more elements, and it is exactly what a large `BLOCK_SIZE` over few warps
# does in Triton. Matmul kernels routinely run at 12–25% occupancy and near
# peak. What occupancy buys is latency hiding for kernels that have nothing
# else to hide it with.
#
# ## Shared memory and bank conflicts
#
# Shared memory is split into 32 **banks**, each 4 bytes wide; consecutive
# 4-byte words sit in consecutive banks, word $w$ in bank $w \bmod 32$. Each
# bank serves one word per clock, so a warp's access completes in one pass
# when its 32 threads hit 32 different banks (or the *same* word, which is
# broadcast). When $k$ threads want different words in one bank, the access
# is replayed $k$ times: a **$k$-way bank conflict**. With thread $t$
# reading word $t \cdot s$, the conflict is $\gcd(s, 32)$-way, and the worst
# case, stride 32, serialises the warp completely:

# %%
from examples.gpu_model.shared_memory import bank_conflict_ways, column_read_ways

for stride in (1, 2, 3, 4, 8, 16, 32, 33):
    print(f"stride {stride:2d} words -> {bank_conflict_ways(stride):2d}-way")

# %% [markdown]
# The classic victim is a transpose: a 32×32 fp32 tile stored row by row has
# a whole column in one bank. Two cures. **Padding** stores rows of 33
# words, shifting each row by one bank. **Swizzling** stores element
# $(r, c)$ at column $c \oplus r$ (XOR), a permutation of each row, so a
# column spreads over all banks with no wasted space; the compiler swizzles
# the shared-memory tiles behind `tl.dot` this way.

# %%
print("column read, rows of 32 words:", column_read_ways(32), "way")
print("column read, rows of 33 words:", column_read_ways(33), "way")
print("column read, XOR-swizzled:   ", column_read_ways(32, swizzled=True), "way")

# %% [markdown]
# ## Global memory: coalescing into 128-byte transactions
#
# Loads from HBM are served in 32-byte sectors grouped into 128-byte lines.
# When the 32 threads of a warp load 32 consecutive 4-byte floats, that is
# one aligned 128-byte transaction and every byte fetched is used: the load
# is **coalesced**. A stride between threads spreads the warp over more
# lines and wastes the rest of each one:

# %%
from examples.gpu_model.coalescing import load_efficiency, transactions_per_warp

cases = [
    ("consecutive fp32", 4, 4, 0),
    ("consecutive fp32, misaligned by 4 B", 4, 4, 4),
    ("every other fp32", 8, 4, 0),
    ("16 B per thread (vectorised)", 16, 16, 0),
    ("a column of a 1024-wide fp32 matrix", 4096, 4, 0),
]
for name, stride, size, offset in cases:
    n = transactions_per_warp(stride, size, offset)
    print(f"{name:38s} {n:2d} x 128 B, {load_efficiency(stride, size, offset):6.1%} of the bytes used")

# %% [markdown]
# In Triton the offsets you load decide this: `tl.arange` along the
# contiguous dimension coalesces; walking down a column does not, which is
# why matmul kernels load tiles whose fast dimension is the tensor's
# contiguous one.
#
# ## Waves and wave quantisation
#
# The grid's blocks run in **waves**: an SM takes as many blocks as
# occupancy allows, and the rest wait for a free slot. If every block takes
# the same time, a grid that overshoots a whole wave by a little pays for a
# whole extra wave. 160 blocks on a 148-SM B200 (one block per SM):

# %%
from examples.gpu_model.waves import waves

w = waves(n_blocks=160, n_sms=GPUS["B200"].sms, blocks_per_sm=1)
print(
    f"{w.count} waves: {w.full_waves} full, then {w.tail_blocks} blocks "
    f"({w.last_wave_fill:.0%} of the SMs busy); {w.efficiency:.0%} of the paid time does work"
)

# %% [markdown]
# The second wave runs 12 blocks on 148 SMs: the kernel takes about twice as
# long as 148 blocks would. The cures: more, smaller blocks (the tail becomes
# a smaller fraction), a block count that is a multiple of the SM count, or a
# *persistent* kernel that launches one program per SM and loops over tiles.
#
# ## The roofline: memory-bound or compute-bound
#
# A kernel does $F$ floating-point operations and moves $B$ bytes to and
# from HBM. Its **arithmetic intensity** is $I = F / B$ (FLOP/byte). With a
# peak compute rate $P$ and a memory bandwidth $\beta$, its time is at least
# the larger of $F/P$ and $B/\beta$, so the rate it can reach is
#
# $$\text{attainable}(I) = \min(P,\; I \cdot \beta).$$
#
# The two roofs meet at the **ridge point** $I^\ast = P / \beta$: kernels
# left of it are memory bound (faster means fewer bytes), kernels right of it
# are compute bound (faster means better use of the arithmetic units). Our
# ceilings are measured, not copied from the spec sheet: every benchmark run
# times a large device-to-device copy and a large bf16 matmul on the same
# machine and stores them with the results. Here they are, from the first
# committed results file for our H100:

# %%
from examples.gpu_model.measured import measured_ceilings
from examples.gpu_model.specs import gpu_for

ceilings = measured_ceilings("h100")
spec = gpu_for(ceilings.gpu)
print(f"{ceilings.gpu} (from {ceilings.path.relative_to(ceilings.path.parents[3])})")
print(
    f"copy ceiling:   {ceilings.copy_gbps:,.0f} GB/s  ({ceilings.copy_gbps / (spec.hbm_tbps * 1000):.0%} of the spec sheet's HBM bandwidth)"
)
print(
    f"matmul ceiling: {ceilings.matmul_tflops:,.0f} TFLOP/s bf16  ({ceilings.matmul_tflops / spec.bf16_dense_tflops:.0%} of the spec sheet's dense bf16 rate)"
)
print(f"ridge point:    {ceilings.ridge_point:,.0f} FLOP/byte")

# %% [markdown]
# A kernel needs a couple of hundred FLOPs per byte to be compute bound on
# this GPU. Element-wise ops and normalisations do a handful: they are
# memory bound, and their figure of merit is GB/s against the copy ceiling.
# One more honest caveat: the matmul roof is a *tensor-core* rate. Work that
# cannot use tensor cores (a subtraction, a running sum) runs on the ordinary
# FP32 units, whose spec-sheet rate is drawn dashed below: a lower roof, and
# still far above what our memory-bound kernels need. An exponential or a
# reciprocal goes to the special-function units, lower still (16 results per
# clock per SM, an eighth of the H100's 128 FP32 lanes), and still enough for
# one per element at memory speed.
#
# Our measured kernels, placed on it: every row of our own kernel in the
# committed results of [Vector addition](../../kernels/vector_add/) and
# [Fused softmax](../../kernels/fused_softmax/). Their intensity is a FLOP
# count per element (`examples.gpu_model.measured.FLOPS_PER_ELEMENT`: one add for the
# vector add; five operations per element for the softmax forward, nine
# with the backward) over the bytes model of each chapter's `bench.py`.

# %%
from examples.gpu_model.measured import measured_points
from examples.gpu_model.roofline import Roof, roofline_svg

roofs = [Roof("bf16 matmul (measured)", ceilings.matmul_tflops)]
if spec.fp32_tflops:
    roofs.append(Roof("FP32 units (spec sheet)", spec.fp32_tflops, dashed=True))
points = measured_points("h100")
HTML(roofline_svg(ceilings.copy_gbps, roofs, points, title=f"Roofline of {ceilings.gpu}", bandwidth_label="copy"))

# %% [markdown]
# Every point sits far left of the ridge, and most sit on, or just under, the
# slanted roof: these kernels are as fast as memory lets them be. The small
# ones fall below it because a launch of a few microseconds cannot reach full
# bandwidth, and the softmax's widest rows (65,536 columns) sit somewhat
# below it too. Making them do fewer FLOPs would change nothing; making them
# move fewer bytes (fusion) is the only lever.

# %%
best = {}
for p in points:
    best[p.group] = max(best.get(p.group, 0), p.tflops / (p.intensity * ceilings.copy_gbps / 1000))
for group, fraction in best.items():
    print(f"{group:24s} best point at {fraction:.0%} of the bandwidth roof")

# %% [markdown]
# ## Why is my kernel slow?
#
# Most slow kernels fail one of the checks above. Put its rate next to the
# roofline first: if it moves more bytes than the operation needs, fuse or
# reuse. If the bytes are minimal but the rate is low, look at occupancy (too
# few resident warps to hide memory latency, often from register pressure),
# at coalescing (loads that split into many 128-byte transactions), and at
# waves (a last wave that leaves most SMs idle). Before any of that, make sure
# the number itself is honest: [Measuring honestly](../measuring/).

# %% [markdown]
# ## Exercises
#
# **1. A register cap.** A kernel uses 96 registers per thread in blocks of
# 128 threads. What occupancy does it get on an H100, and what is the most
# registers per thread that would give it 50%?
#
# **2. Padding a tile.** A 32×32 fp32 tile is read by columns. What is the
# smallest number of words of padding per row that makes the read
# conflict-free, and why does 2 words not work?
#
# **3. A matmul on the roofline.** Is a bf16 matmul of 4096×4096 by
# 4096×4096 compute or memory bound on our H100? What is the lower bound on
# its time? And a 16×4096 by 4096×4096 one (a decoding step)?

# %%
from academy.site.notebook import answer

answer("examples/gpu_model/answers.py:register_cap", "Answer 1: the register cap")

# %%
answer("examples/gpu_model/answers.py:padding", "Answer 2: padding")

# %%
answer("examples/gpu_model/answers.py:matmul_roofline", "Answer 3: a matmul on the roofline")

# %% [markdown]
# With the measured ceilings, the answers come out as:

# %%
from examples.gpu_model.answers import matmul_intensity, matmul_time_bound_ms, register_cap

print("1:", f"{occupancy(96, 128, gpu='H100').fraction:.2%} occupancy;", register_cap(128, 0.5), "registers for 50%")
for m in (4096, 16):
    bound = matmul_time_bound_ms(m, 4096, 4096, ceilings.matmul_tflops, ceilings.copy_gbps)
    side = "compute" if matmul_intensity(m, 4096, 4096) >= ceilings.ridge_point else "memory"
    print(f"3: M={m}: {matmul_intensity(m, 4096, 4096):,.0f} FLOP/B, {side} bound, at least {bound * 1000:,.1f} µs")

# %% [markdown]
# `tests/gpu_model/test_answers.py` checks the three answers.
# Next: [Measuring honestly](../measuring/), how the numbers on this page
# were taken.
