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
# # Why Triton
#
# This handbook teaches one skill: writing GPU kernels that run close to what
# the hardware allows, in Triton. Its pages do four things for every kernel
# they cover: explain it line by line, derive the math of its forward and
# backward passes, test it against an independent reference, and measure it
# on a real GPU against the best code we can find (PyTorch eager,
# `torch.compile`, library kernels written in CUDA). The
# [Learn](../first_kernel/) track builds the ideas; the
# [Kernels](../../kernels/vector_add/) section takes famous kernels apart.
#
# This first page answers the question a CUDA programmer asks before any
# other: why not just write CUDA?
#
# ## What Triton is
#
# Triton is a language and a compiler for GPU kernels, started by Philippe
# Tillet during his PhD and developed at OpenAI since. You write a kernel as a
# Python function under `@triton.jit`, in a restricted subset of Python plus
# the `triton.language` (`tl`) operations. On its first call the function is
# compiled, through Triton's own MLIR dialects, to machine code for an NVIDIA
# GPU (through PTX) or an AMD GPU (through AMDGCN), and the binary is cached.
# It takes PyTorch tensors as arguments; no C++ extension, no build step.
# It is also what `torch.compile` writes: the kernels PyTorch's Inductor
# generates for fused element-wise ops and reductions are Triton kernels.
#
# The one idea that makes it different: **a Triton program works on a block
# of data, not on one element**. Everything else follows from that.

# %% [markdown]
# ## One kernel, two languages
#
# Here is vector addition written in CUDA C++, the way a first CUDA course
# writes it. It is shown as text for comparison only; nothing on this site
# compiles it.
#
# ```cuda
# // CUDA, for comparison: the work of ONE thread.
# __global__ void add_kernel(const float* x, const float* y, float* out, long n) {
#     long i = (long)blockIdx.x * blockDim.x + threadIdx.x;  // which element is mine?
#     if (i < n) {                                           // threads past the end do nothing
#         out[i] = x[i] + y[i];
#     }
# }
#
# // Host side: choose a block of threads, enough blocks to cover n, launch.
# int threads = 256;
# int blocks = (n + threads - 1) / threads;
# add_kernel<<<blocks, threads>>>(x, y, out, n);
# ```
#
# And here is the Triton kernel of our [Vector addition](../../kernels/vector_add/)
# chapter, pulled from `examples/vector_add/kernel.py`:

# %%
import re

from academy.site.notebook import section

from IPython.display import Markdown

# The chapter page explains the numbered markers; here they are dropped.
code = re.sub(r"\s*# \(\d+\)!", "", section("examples/vector_add/kernel.py:kernel"))
Markdown(f"```python\n{code}\n```")

# %% [markdown]
# The shape is the same: find out who I am, compute which elements are mine,
# switch off the ones past the end, load, add, store. The difference is in
# the word "mine".
#
# - **CUDA is per-thread.** The kernel body is what *one* thread does, and
#   `i` is a single integer. The block of threads (`blockDim.x = 256`) exists
#   only in the launch line; how those 256 threads together touch memory is
#   something you reason about, not something you write.
# - **Triton is per-block.** The body is what one *program* does, and
#   `offsets` is a whole vector of `BLOCK_SIZE` indices; `x` and `y` are
#   blocks of values, and `x + y` adds blocks. How the block is spread over
#   the program's threads is the compiler's decision. A Triton program runs
#   as one CUDA thread block (CTA): `num_warps` warps of 32 threads.
#
# The launcher of our chapter asks for `num_warps=8`. Here is what the
# compiler has to split:

# %%
from examples.vector_add.kernel import BLOCK_SIZE

num_warps = 8  # what the add() launcher passes
threads = num_warps * 32
per_thread = BLOCK_SIZE // threads
print(f"BLOCK_SIZE = {BLOCK_SIZE} elements over {threads} threads: {per_thread} fp32 values per thread")
print(f"= {per_thread * 4 // 16} loads of 16 bytes (128-bit) per thread per input, if the addresses allow it")

# %% [markdown]
# In CUDA, getting those 128-bit loads means rewriting the kernel around
# `float4`, handling the ragged tail by hand, and knowing the pointer is
# 16-byte aligned. Triton does it when it can prove the addresses are
# contiguous and aligned: it specialises the compiled kernel on integer
# arguments divisible by 16 and on pointer alignment, which is why a stride
# of 1 (known at compile time) gives faster code than an arbitrary stride.
#
# Does the per-block kernel run as fast as the hand-written kind? Here is what
# our `add` reached on the largest vector of the committed benchmark, next
# to PyTorch's own CUDA kernel for `x + y`, as a fraction of a device-to-device
# copy measured in the same run:

# %%
from academy.bench.results import load
from academy.chapters import chapter

for path in chapter("vector_add").results_files():
    results = load(path)
    largest = max(row.params["n"] for row in results.rows)
    for row in results.rows:
        if row.params["n"] == largest:
            print(
                f"{results.provenance.gpu}, n = {largest:,}: {row.provider:8s} "
                f"{row.rate:,.0f} GB/s = {row.fraction_of_ceiling:.0%} of the copy ceiling"
            )

# %% [markdown]
# Both saturate memory: for a kernel this simple there is nothing left to win,
# and Triton got there in a dozen lines of Python.
#
# ## What CUDA makes you do by hand, and what Triton does for you
#
# Vector addition hides most of the work, because each element is touched
# once. Real kernels (a matrix multiply, attention, a normalisation with a
# reduction) share data between threads, and that is where CUDA gets
# expensive to write. The [next pages](../gpu_model/) explain the hardware
# behind each row of this table.
#
# | Job | In CUDA, you... | In Triton... |
# |---|---|---|
# | **Coalescing** | order the index math so that the 32 threads of a warp touch consecutive addresses, and vectorise by hand (`float4`) | you write block loads (`tl.load(ptr + offsets)`); the compiler picks a layout that gives each thread a contiguous run and emits wide, coalesced loads |
# | **Tiling** | choose tile sizes, map `threadIdx` onto tile rows and columns, write the loops over tiles | you choose block shapes (`BLOCK_M`, `BLOCK_N`, `BLOCK_K` as `tl.constexpr`) and write the loop over tiles; the mapping onto threads is the compiler's |
# | **Shared memory** | declare `__shared__` buffers, size them, index them, pad or swizzle them against bank conflicts | operands of `tl.dot` and layout changes are staged through shared memory the compiler allocates and swizzles |
# | **Synchronisation** | put `__syncthreads()` between every write and read of shared memory, and get it right on every path | the compiler inserts the barriers its own shared-memory traffic needs |
# | **Pipelining** | write multi-stage double buffering with asynchronous copies (`cp.async`, TMA) and their waits | `num_stages=` asks the compiler to software-pipeline the loop over tiles |
# | **Tensor cores** | write warp-level `mma`/`wgmma` code, or adopt CUTLASS templates | `tl.dot(a, b)` on blocks; the compiler picks the instructions for the GPU |
# | **Boilerplate** | a C++ extension, a build system, launch checks, bindings to PyTorch | a decorated Python function that takes tensors and compiles on first call |
#
# The pains that table answers are the usual complaints about CUDA: a steep
# learning curve before the first fast kernel, boilerplate around every
# kernel, coalescing and tiling done by hand, and code that runs on NVIDIA
# GPUs only. Triton's answers: a higher **abstraction** (blocks, not
# threads), **automatic optimisation** of the low-level jobs above,
# **Python integration** (tensors in, tensors out, no build), **performance**
# within reach of hand-written kernels for most of what deep learning needs
# (the kernel chapters measure it, provider against provider), and
# **readability**: a fused softmax fits on one screen.
#
# ## When not to use Triton: where it is the wrong tool
#
# The block abstraction is a trade: you give up control below the block.
# That is the wrong trade when:
#
# - **you need warp-level control**: warp shuffles, explicit warp
#   specialisation with producer and consumer warps, per-lane register
#   tricks. Triton decides what each warp does (recent versions expose some
#   warp specialisation, but as a compiler option, not as code you write);
# - **you need your own synchronisation protocol** between blocks or
#   threads: spin locks and flags beyond simple atomics, cooperative grid-wide
#   barriers, cluster-level handshakes. Triton has atomics (with
#   memory-ordering options), but you never see a thread, so there is no way
#   to write a protocol between the threads of a block;
# - **the data structure is irregular**: trees, hash tables, sparse formats
#   with per-thread branching and pointer chasing. Triton wants blocks of
#   regular, maskable offsets;
# - **the target is not an NVIDIA or AMD GPU**: CPUs, other accelerators and
#   phones are outside its mainline backends;
# - **the op is tiny or already served**: a single `torch.add`, a cuBLAS
#   matmul at a standard shape, cuDNN's convolutions. A custom kernel there
#   costs compile time and maintenance for no gain; write Triton where
#   **fusion** (several ops, one trip to memory) or an unusual shape makes the
#   library call waste bandwidth;
# - **you need the last few percent at the frontier**: the newest
#   tensor-core features (Blackwell's tensor memory, Hopper's TMA multicast)
#   reach CUDA, CUTLASS and lower-level DSLs first, and the fastest
#   attention and GEMM kernels on a new GPU are usually written there.
#
# ## Exercises
#
# **1. A grid-stride loop, Triton style.** CUDA programmers often launch a
# fixed number of blocks and let each loop over the data with a stride of
# the whole grid. Write `add_grid_stride(x, y, n_programs)`: the same sum, a
# grid of exactly `n_programs` programs whatever the size, each program
# handling blocks `pid`, `pid + n_programs`, ...
#
# **2. Fusion, counted.** `torch.relu(x + y)` runs two kernels. Write
# `add_relu(x, y)` as one Triton kernel, and count the bytes each version
# moves for `n` elements. Which ceiling bounds both?

# %%
from academy.site.notebook import answer

answer("examples/why_triton/answers.py:grid_stride", "Answer 1: a grid-stride vector add")

# %%
answer("examples/why_triton/answers.py:add_relu", "Answer 2: add and ReLU in one pass")

# %% [markdown]
# The fused kernel moves 3 passes over memory instead of 5: both versions are
# bandwidth bound (one or two FLOPs per element is nowhere near the compute
# roof), so the fused one should take about 3/5 of the time.
# `tests/why_triton/test_answers.py` runs both answers against PyTorch.
#
# ## Resources
#
# - [Triton's documentation and official tutorials](https://triton-lang.org/):
#   vector addition, fused softmax, matrix multiplication, layer norm,
#   attention.
# - [Triton-Puzzles](https://github.com/srush/Triton-Puzzles): short
#   exercises that build the block-programming reflex, runnable in the
#   interpreter.
# - P. Tillet, H. T. Kung and D. Cox, *Triton: An Intermediate Language and
#   Compiler for Tiled Neural Network Computations*, MAPL 2019: the design
#   behind the block abstraction.
# - NVIDIA's *CUDA C++ Programming Guide*, and any good video course on CUDA
#   programming: useful to read what the compiler does for you.
# - Next here: [Your first kernel](../first_kernel/) runs a kernel on a CPU;
#   [The GPU you are programming](../gpu_model/) is the hardware under it.
