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
# # Meta-parameters and autotuning
#
# The [tiled matmul](../tiled_matmul/) picked its tile shape from a small
# table by hand. The best choice depends on the GPU, the dtype and the shape
# of the problem, and the only reliable way to find it is to measure. This
# tutorial covers:
#
# - the knobs: block sizes, `num_warps`, `num_stages`;
# - `@triton.autotune`: configs, the key, pruning configs before timing;
# - `@triton.heuristics`: meta-parameters *computed* from the arguments;
# - caching: compiled kernels and tuned configs on disk;
# - why autotuning makes a tutorial (and a first call) slow;
# - how an autotuned kernel still runs under the CPU interpreter.
#
# The kernel is `examples/autotuning/autotune.py`, the tutorial matmul with
# its meta-parameters searched.

# %%
import academy  # first: on a CPU it switches Triton to the interpreter before any kernel exists
from academy.site.notebook import answer, show

import torch
import triton

from examples.autotuning.answers import shared_memory_bytes
from examples.autotuning.autotune import (
    CONFIGS,
    configs_for,
    even_k,
    matmul_autotuned,
    matmul_autotuned_kernel,
    prune_configs,
)

torch.manual_seed(0)
print("device:", academy.DEVICE, "| interpreted:", academy.INTERPRETED)

# %% [markdown]
# ## 1. The knobs: what num_warps and num_stages are
#
# A Triton kernel has two kinds of parameters. Ordinary arguments (pointers,
# sizes, strides) are values at run time. **Meta-parameters** are
# `tl.constexpr` arguments and launch options: each distinct value compiles a
# distinct kernel. For a matmul:
#
# | knob | what it sets | pulls towards bigger | pulls towards smaller |
# |---|---|---|---|
# | `BLOCK_M`, `BLOCK_N` | the output tile of one program | arithmetic intensity $\frac{2 B_M B_N}{(B_M + B_N) s}$ | registers for the $B_M B_N$ fp32 accumulator; enough tiles to fill every SM |
# | `BLOCK_K` | the K step | fewer loop trips | shared memory per stage |
# | `num_warps` | threads per program ($32 \times$ warps) | more hands on a big tile | registers per thread, scheduling overhead on a small tile |
# | `num_stages` | K steps in flight (software pipelining) | hides memory latency | shared memory: each stage holds an $A$ and a $B$ tile |
# | `GROUP_SIZE_M` | program order | L2 reuse | (little cost) |
#
# Shared memory is the hard limit: a pipeline of $S$ stages keeps
# $S\,(B_M B_K + B_K B_N)\,s$ bytes resident. The configs we will search, and
# what each needs for fp16 and fp32:

# %%
print(" BM   BN   BK  warps stages  fp16 KiB  fp32 KiB")
for c in configs_for(interpreted=False):
    kw = c.kwargs
    print(
        f"{kw['BLOCK_M']:3d}  {kw['BLOCK_N']:3d}  {kw['BLOCK_K']:3d}  {c.num_warps:5d} {c.num_stages:6d}"
        f"  {shared_memory_bytes(c, torch.float16) / 1024:8.0f}  {shared_memory_bytes(c, torch.float32) / 1024:8.0f}"
    )

# %% [markdown]
# An H100 SM has 228 KiB of shared memory, so the largest fp32 configs would
# not even launch. Too small is a problem too: an $M = 40$ problem in
# $256$-row tiles computes mostly padding.
#
# ## 2. The autotune decorator
#
# The decorator takes a list of `triton.Config` (meta-parameter values plus
# `num_warps`/`num_stages`) and a **key**: the names of arguments whose values
# select a tuning. The first call with a new key compiles every config, times
# each on the real arguments, remembers the fastest for that key, and uses it
# from then on. Triton adds the dtypes of tensor arguments to the key by
# itself, so fp16 and fp32 are tuned apart.

# %%
show("examples/autotuning/autotune.py:configs")

# %% [markdown]
# 1. Under the interpreter there is nothing to time (section 6), so the list
#    is one config: the autotuner then launches it without benchmarking.
# 2. Big tiles with 8 warps: the fast configs for large fp16/bf16 problems.
# 3. Small tiles with deep pipelines: for small or skinny problems, and for
#    fp32, whose tiles weigh twice as much.
#
# The decorated kernel: `autotune` outside, `heuristics` in the middle,
# `jit` innermost.

# %%
show("examples/autotuning/autotune.py:autotuned_kernel")

# %% [markdown]
# 1. The key. Every distinct `(M, N, K)` (and dtype) is tuned once. A key
#    that changes on every call (a sequence length, a batch size) would
#    re-tune on every call: key on something coarser (exercise 1).
# 2. `early_config_prune` removes configs before any is compiled or timed
#    (section 3).
# 3. `cache_results=True` stores the timings on disk, so the next process
#    skips the search (section 5).
# 4. `@triton.heuristics` computes `EVEN_K` from the arguments *and* the
#    config chosen (section 4).
# 5. A `constexpr` `if`: the branch not taken is not compiled at all.
#
# The launcher no longer passes block sizes; the grid is a function of the
# chosen config, because the number of tiles depends on it:

# %%
show("examples/autotuning/autotune.py:launcher")

# %% [markdown]
# 1. The grid as a function of the meta-parameters: the autotuner calls it
#    with each config it tries.
# 2. Only the arguments the autotuner does not own are passed; passing
#    `BLOCK_M=...` here too would be an error.
#
# ## 3. Pruning configs before timing them
#
# Timing a config costs a compilation (seconds) plus a benchmark, so configs
# that cannot win should not be tried. `prune_configs_by={"early_config_prune":
# f}` calls `f(configs, named_args, **kwargs)` with the call's arguments and
# uses what it returns (at least one config).

# %%
show("examples/autotuning/autotune.py:prune")

# %% [markdown]
# 1. No tile larger than the matrix rounded up to a power of two (a tile of
#    64 is always allowed).
# 2. The shared-memory formula of section 1, against a budget below the
#    hardware limit.
#
# Pruning is plain Python, so we can watch it work on the GPU list even here:


# %%
def kept(M, N, dtype):
    args = {"M": M, "N": N, "K": 4096, "a_ptr": torch.empty(0, dtype=dtype)}
    return [
        f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']}x{c.kwargs['BLOCK_K']}/s{c.num_stages}"
        for c in prune_configs(configs_for(interpreted=False), args)
    ]


for M, N, dtype in [
    (8192, 8192, torch.float16),
    (8192, 8192, torch.float32),
    (40, 8192, torch.float16),
    (16, 16, torch.float16),
]:
    names = kept(M, N, dtype)
    print(f"M={M:5d} N={N:5d} {str(dtype):14s}: {len(names)} of {len(configs_for(False))} kept: {', '.join(names)}")

# %% [markdown]
# ## 4. Heuristics compute meta-parameters
#
# Some meta-parameters need no search: they follow from the arguments.
# `@triton.heuristics({"NAME": f})` calls `f(args)` at each launch, where
# `args` holds the call's arguments and the meta-parameters already chosen
# (so it must sit *below* `autotune` to see `BLOCK_K`), and passes the result
# as the constexpr `NAME`. Here `EVEN_K` says whether `BLOCK_K` divides `K`;
# when it does, the K loop compiles without masks (marker 5 in the kernel
# above).

# %%
for K, BLOCK_K in [(4096, 64), (4100, 64), (70, 32)]:
    print(f"K={K}, BLOCK_K={BLOCK_K}: EVEN_K = {even_k({'K': K, 'BLOCK_K': BLOCK_K})}")

# %% [markdown]
# Because `EVEN_K` is a `constexpr`, `K = 4096` and `K = 4100` run two
# different compiled kernels. Heuristics are also the usual way to pick
# `BLOCK_N = next_power_of_2(N)` for a row-wise kernel, or `num_warps` from a
# block size.
#
# A well-known rule of that kind is the settings helper of Unsloth's
# row-wise kernels (the cross-entropy, GeGLU, SwiGLU and layer norm of the
# earlier Triton Academy repository all call one): the block is the row
# rounded up to a power of two, refused
# above 65,536 lanes, and the warps grow with it, 4 by default, 8 from 2048
# lanes, 16 from 8192 and 32 from 32768, so that each thread holds a
# roughly constant number of values. Written out:

# %%


def row_settings(n: int, max_block: int = 65536) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for a row of n values, the Unsloth-style ladder."""
    block = triton.next_power_of_2(n)
    if block > max_block:
        raise ValueError(f"a row of {n} values needs {block} lanes; at most {max_block} fit one block")
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, warps


for n in (1000, 4096, 11008, 32000, 65536):
    block, warps = row_settings(n)
    print(f"N = {n:6d}: BLOCK_SIZE = {block:6d}, num_warps = {warps:2d}, {block // (32 * warps):3d} values per thread")

# %% [markdown]
# The values per thread stay between 8 and 64 across the ladder. The cap is
# the rule's real limit: a vocabulary of 128,256 has no block, which is why
# our [cross-entropy](../../kernels/cross_entropy/) loops over chunks
# instead, and why our norm chapters switch to a chunked kernel above their
# widest in-register row.
#
# ## 5. Caching: where compiled kernels and tuning results are kept
#
# Two different things are cached.
#
# - **Compiled kernels.** Every compilation (one per distinct set of
#   constexprs, launch options and argument specialisations) is written to
#   Triton's cache directory, `~/.triton/cache` unless the environment variable
#   `TRITON_CACHE_DIR` points elsewhere. A new process finds the binary
#   there and skips the compiler.
# - **Tuning results.** The autotuner's choice per key lives in memory, in
#   the decorated kernel's `cache` dictionary, and dies with the process. With
#   `cache_results=True` on the decorator (or `TRITON_CACHE_AUTOTUNING=1` in
#   the environment) the timings of each tuning are also written to the cache
#   directory as `<kernel name>.autotune.json`, under a hash of the Triton
#   version, the GPU target, the kernel source, the key and the config list.
#   Change any of those and the search runs again.
#
# `TRITON_PRINT_AUTOTUNING=1` prints each search as it finishes: the key, the
# time it took and the config chosen. In a process, the choice is readable
# from the kernel:

# %%
a = torch.randn(96, 64, device=academy.DEVICE, dtype=torch.float16)
b = torch.randn(64, 80, device=academy.DEVICE, dtype=torch.float16)
c = matmul_autotuned(a, b, activation="relu")
exact = torch.relu(a.double() @ b.double())
print("relative error:", f"{((c.double() - exact).norm() / exact.norm()).item():.1e}")
print("key arguments: ", matmul_autotuned_kernel.keys)
print("config used:   ", matmul_autotuned_kernel.best_config)
print("tuned keys so far:", list(matmul_autotuned_kernel.cache))

# %% [markdown]
# Here (on a CPU) the list of tuned keys stays empty: with a single config
# the autotuner does not search, and `best_config` is that one config.
#
# ## 6. Why autotuning a tutorial slows it down
#
# Every *new key* pays for the whole search before the first result comes
# back:
#
# $$T_\text{first call} \approx \sum_{\text{configs kept}} \big(T_\text{compile} + T_\text{bench}\big).$$
#
# Compiling a matmul config takes on the order of a second. Triton's default
# benchmark (`triton.testing.do_bench`) then runs each config for about
# 25 ms of warm-up and 100 ms of measurement. With eight configs that is
# several seconds for one key, and a notebook or a test suite that sweeps
# twenty shapes pays it twenty times. That is why this handbook's tutorials
# call the hand-configured kernel, why the tests run the autotuned one on a
# handful of small shapes, and why exercise 1 buckets the key.
#
# How each config is timed is itself pluggable: `autotune(..., do_bench=f)`
# takes any `f(kernel_call, quantiles)`. `triton.testing.do_bench` times
# repeated launches with CUDA events and clears the L2 cache between them;
# `triton.testing.do_bench_cudagraph` captures the launches in a CUDA graph
# first, which removes the CPU's launch overhead from small kernels, the
# same reason the handbook's benchmark runner times graph replays
# ([Measuring honestly](../measuring/)).
#
# ## 7. Autotuned kernels under the interpreter
#
# The interpreter runs programs one after another on the CPU; it has no GPU
# to time on. Given several configs, `@triton.autotune` tries to benchmark
# them and fails. The fix is a choice made once, where the configs are
# defined: `configs_for(academy.INTERPRETED)` returns a single small config on
# a CPU, and the autotuner launches a single config directly, without timing
# it. Everything else (the key, pruning, heuristics, the launcher) is the same
# code on both machines, and the tests check the GPU list and the pruning
# rules as plain Python.

# %%
print("configs here:", len(CONFIGS), "| on a GPU:", len(configs_for(interpreted=False)))
for K in (64, 70):  # EVEN_K, then masked
    a = torch.randn(40, K, device=academy.DEVICE, dtype=torch.float16)
    b = torch.randn(K, 48, device=academy.DEVICE, dtype=torch.float16)
    c = matmul_autotuned(a, b)
    exact = a.double() @ b.double()
    print(f"K={K}: relative error {((c.double() - exact).norm() / exact.norm()).item():.1e}")

# %% [markdown]
# ## Exercises
#
# **1. A coarser key.** A server multiplies activations with a varying number
# of rows (1000, 1010, 1024, ...). Keyed on `M`, the kernel re-tunes for every
# new row count. Change the key so that all $M$ in $(512, 1024]$ share one
# tuning.

# %%
answer("examples/autotuning/answers.py:matmul_bucketed")

# %% [markdown]
# **2. Will it fit?** Write `shared_memory_bytes(config, dtype)` and use it to
# list the GPU configs that fit in 100 KiB of shared memory for fp32 inputs.

# %%
answer("examples/autotuning/answers.py:shared_memory_bytes")

# %%
from examples.autotuning.answers import configs_that_fit

for c in configs_that_fit(configs_for(interpreted=False), torch.float32, 100 * 1024):
    print(
        c.kwargs["BLOCK_M"],
        c.kwargs["BLOCK_N"],
        c.kwargs["BLOCK_K"],
        "stages",
        c.num_stages,
        f"{shared_memory_bytes(c, torch.float32) / 1024:.0f} KiB",
    )

# %% [markdown]
# Both answers run as tests in `tests/autotuning/test_answers.py`; on a
# GPU a test also checks that 1000, 1010 and 1024 rows share one tuning.
