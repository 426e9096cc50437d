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
# # Measuring honestly
#
# A kernel is only "fast" relative to a number, and that number is easy to get
# wrong in ways that flatter you. This page goes through how a GPU time is
# taken, what goes wrong when it is taken carelessly, and how to look one
# level down, at the code the compiler produced, when a time surprises you.
#
# The site is built on a machine without a GPU. Where a pitfall needs a GPU to
# show itself, we reproduce it on a tiny *simulated* GPU with a virtual clock;
# every measured number on this page is read from a results file committed
# after a run on real hardware, never typed in.

# %%
import inspect

import academy  # first: it decides whether kernels are compiled or interpreted
from academy.site.notebook import answer, bench_table, show

import numpy as np
import torch

print("device:", academy.DEVICE)

# %% [markdown]
# ## 1. A launch returns before the work is done
#
# When Python calls a Triton kernel (or `torch.add` on a CUDA tensor), the
# host puts a launch command in a queue, the *stream*, and returns at once.
# The GPU works through the queue on its own. Host clocks such as
# `time.perf_counter()` therefore time the *queueing*, unless something makes
# the host wait for the GPU.
#
# Here is a GPU small enough to read. The host and the device share one clock;
# `launch` charges the host a few microseconds and schedules the device work
# behind whatever is already queued.

# %%
show("examples/measuring/answers.py:simulated_gpu")

# %%
from examples.measuring.answers import SimulatedGPU

gpu = SimulatedGPU(launch_ms=0.005, compile_ms=50.0)
gpu.launch("add", 0.2)  # first call: compiles
gpu.synchronize()

start = gpu.host_now
gpu.launch("add", 0.2)  # a kernel that needs 0.2 ms of GPU time
print(f"without synchronising: {gpu.host_now - start:.3f} ms  (only the launch)")
gpu.synchronize()
print(f"after synchronising:   {gpu.host_now - start:.3f} ms  (the launch and the work)")

# %% [markdown]
# On a real GPU the same two lines are `torch.cuda.synchronize()` before
# reading the clock at the start (so earlier queued work does not leak in) and
# again before reading it at the end.
#
# ### Events time the device, not the host
#
# A CUDA *event* is a marker placed in the stream. The GPU stamps it with its
# own clock when it reaches it, so the difference between two events is the
# device time of the work between them, with no host in the picture:
# `torch.cuda.Event(enable_timing=True)`, `.record()` on each side,
# `torch.cuda.synchronize()`, then `start.elapsed_time(end)` in milliseconds.
# The function below does exactly that; it is defined here but only called
# when this page is executed on a GPU.


# %%
def time_with_events(fn, reps: int = 100) -> list[float]:
    """Device time of each of ``reps`` calls of ``fn``, in ms (CUDA only)."""
    fn()  # compile / warm up outside the timed region
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for begin, end in pairs:
        begin.record()
        fn()
        end.record()
    torch.cuda.synchronize()  # the events' stamps are ready only once the GPU got there
    return [begin.elapsed_time(end) for begin, end in pairs]


if academy.DEVICE == "cuda":
    from examples.vector_add.kernel import add

    a, b = torch.randn(2**24, device="cuda"), torch.randn(2**24, device="cuda")
    print(f"median of 100 event-timed calls: {np.median(time_with_events(lambda: add(a, b))):.4f} ms")
else:
    print("no GPU here: time_with_events is shown, not run")

# %% [markdown]
# In the simulation, an event "fires" when the device has finished the work
# queued before it. Five back-to-back launches bracketed by two events give
# the device time per call, even though the host never waited in between:

# %%
gpu = SimulatedGPU(launch_ms=0.005, compile_ms=0.0)
begin = gpu.record_event()
for _ in range(5):
    gpu.launch("add", 0.2)
end = gpu.record_event()
print(f"events: {(end - begin) / 5:.3f} ms per call")

# %% [markdown]
# ## 2. Warm up, and never time the first call
#
# The first call of a `@triton.jit` kernel with new argument types compiles
# it: tens to hundreds of milliseconds of host work, against microseconds for
# the kernel. The first calls after that may still pay for lazy module
# loading, memory allocation or a GPU clocking up from idle. A benchmark runs
# the function a few times *before* it starts timing. Timing just once, from
# a cold start, reports the compiler:

# %%
gpu = SimulatedGPU(launch_ms=0.005, compile_ms=50.0)
gpu.synchronize()
start = gpu.host_now
gpu.launch("gelu", 0.2)
gpu.synchronize()
print(f"one cold call: {gpu.host_now - start:.3f} ms for 0.2 ms of work")

# %% [markdown]
# ## 3. Many samples, and the median
#
# GPU timings are not normally distributed around a true value. There is a
# floor the kernel cannot beat, a little jitter above it, and now and then a
# sample several times longer: another process took the GPU, the clocks
# dropped, the host was descheduled between two launches. A *mean* of such
# samples is pulled up by the rare stalls; a *mean of one run* is whatever
# that run happened to be. The median and a pair of quantiles (we report the
# 20th and 80th percentiles) describe the typical call and how much it varies.
#
# The samples below are generated, not measured: a 50 µs floor with a 3% rate
# of stalls.

# %%
show("examples/measuring/answers.py:noisy_timings")

# %%
from examples.measuring.answers import noisy_timings

samples_ms = noisy_timings(2000, 0.05, seed=1)
p20, median, p80 = np.quantile(samples_ms, [0.2, 0.5, 0.8])
print(f"mean   {samples_ms.mean() * 1e3:7.2f} µs")
print(f"median {median * 1e3:7.2f} µs   (p20 {p20 * 1e3:.2f}, p80 {p80 * 1e3:.2f})")
print(f"share of samples below the mean: {np.mean(samples_ms < samples_ms.mean()):.0%}")
print("three single runs:", ", ".join(f"{s * 1e3:.2f} µs" for s in samples_ms[[0, 57, 1234]]))

# %% [markdown]
# Nearly every sample is below the mean: the mean describes no actual call.
# A wide p20–p80 range is a warning in itself: the measurement was noisy and
# should be repeated, not averaged away.
#
# ### Comparing kernels: give them the same clock states
#
# A comparison has a trap the median cannot fix. A GPU under a power limit
# lowers its clock while a power-hungry kernel runs (a big matmul, cuDNN's
# attention), and the kernel that runs next starts on the lowered clock.
# Time two providers one after the other and each can sit in a different
# state. Interleave their calls, one of each per round, and all of them see
# the same states, but only if the *order* varies. The simulated GPU below
# stretches a kernel by 10% when the one before it was hungry. Three
# kernels: a hungry peer, ours, and ours again under a second name, so the
# last two should read the same.

# %%
show("examples/measuring/answers.py:power_capped")

# %%
from examples.measuring.answers import interleaved_medians

kernels = {"peer": (0.9, True), "ours": (1.0, False), "ours again": (1.0, False)}
for order in ("fixed", "rotated", "random"):
    medians = interleaved_medians(kernels, order)
    print(
        f"{order:8s} peer {medians['peer']:.3f} ms, ours {medians['ours']:.3f} ms, "
        f"ours again {medians['ours again']:.3f} ms: the same kernel read "
        f"{max(medians['ours'], medians['ours again']) / min(medians['ours'], medians['ours again']):.3f}× apart"
    )

# %% [markdown]
# In a fixed order, "ours" always follows the peer and pays for it in full,
# while the copy of it placed later pays nothing. Rotating the order by one
# place each round does not cure it: the cyclic order, and so who follows
# whom, stays the same except at the seams between rounds. A fresh random
# order each round spreads the peer's cost over everyone, and the two copies
# agree. Our harness shuffles its rounds this way, and it times the shipped
# kernel under two names where it can, as a check on its own resolution
# ([how it is timed](../../performance/#how-it-is-timed) has the H100 run
# that showed the bias).
#
# ## 4. Inputs that sit in L2
#
# An H100 has 50 MB of L2 cache between the SMs and HBM. Call a kernel on the
# same 8 MB input a hundred times and, after the first call, it reads that
# input from L2, several times faster than HBM. For a memory-bound kernel
# this measures the cache, not the kernel as it runs inside a model, where
# its inputs were just written by someone else and evicted by others.
#
# Two cures:
#
# - **flush**: before each timed call, write a buffer larger than L2, so
#   that L2 holds that buffer and not your inputs. `do_bench` does this
#   (next section);
# - **rotate**: keep several copies of the inputs and call the kernel on
#   each in turn, enough copies that their total is a few times the L2 size.
#   Our [benchmark harness](../../performance/#how-it-is-timed) does this,
#   with four times L2.
#
# How many copies that takes is the first exercise below.
#
# ## 5. What Triton's benchmark helper, do_bench, does
#
# `do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="mean")` is
# Triton's timer. Read from the installed source (below), step by step:
#
# 1. call `fn` once and synchronise (this compiles and loads the kernel);
# 2. allocate the flush buffer: on NVIDIA GPUs, 256 MB of `int32`
#    (`get_empty_cache_for_benchmark`);
# 3. estimate the time of one call: five calls, each after zeroing the flush
#    buffer, between two events;
# 4. from that estimate, choose the counts: enough warm-up calls to fill
#    `warmup` ms and timed calls to fill `rep` ms (at least one of each);
# 5. warm up;
# 6. for each timed call: reset the tensors in `grad_to_none` to `None`,
#    zero the flush buffer (`clear_cache`, a `zero_()` kernel: the L2 now
#    holds zeros, not your inputs), record an event, call `fn`, record an
#    event;
# 7. synchronise once, read every pair of events, and return the requested
#    `quantiles`, or else the `return_mode` statistic: **the mean by
#    default**. Ask for `quantiles=[0.5, 0.2, 0.8]` to get a median and a spread.
#
# The lines that do steps 2, 6 and 7:

# %%
import triton.testing

source = inspect.getsource(triton.testing.do_bench)
for line in source.splitlines():
    if any(key in line for key in ("get_empty_cache", "clear_cache(cache)", ".record()", "_summarize")):
        print(line.strip())
print("default return_mode:", inspect.signature(triton.testing.do_bench).parameters["return_mode"].default)

# %% [markdown]
# Two consequences. Each event pair brackets one *host-launched* call, so the
# time includes any gap in which the GPU waited for Python to launch the
# next kernel: for a function that launches several small kernels, or runs
# autograd, that is host time. And the zeroing kernel runs right before each
# call, so the GPU is never idle when `fn` starts. Our harness removes the
# host from the measurement with [CUDA graphs](../../performance/#how-it-is-timed)
# and uses `do_bench` only for the two large ceilings.
#
# ## 6. Small sizes measure a floor
#
# Vector addition reads two arrays and writes a third, so its
# time should grow with `n`. The committed H100 results say otherwise for
# small `n`:

# %%
bench_table("vector_add")

# %%
from academy.bench.results import load
from academy.chapters import chapter

files = chapter("vector_add").results_files()
if files:
    measured = load(files[0])
    ours = sorted((r for r in measured.rows if r.provider == "academy"), key=lambda r: r.params["n"])
    smallest, largest = ours[0], ours[-1]
    for row in ours:
        print(f"n = 2^{row.params['n'].bit_length() - 1:<2}  {row.ms * 1e3:9.2f} µs   {row.rate:8.1f} GB/s")
    print(f"\n{largest.params['n'] // smallest.params['n']:,}× more data took {largest.ms / smallest.ms:,.0f}× longer")
else:
    print("vector_add has no committed results yet")

# %% [markdown]
# The first rows barely change in time while `n` grows: that is the floor of
# one kernel on the GPU (getting the grid onto the SMs, one round trip to
# memory, the tail of the last block), paid however little work there is.
# These numbers come from CUDA-graph replays, so the *host's* launch cost,
# several microseconds more per call, is not even in them. Below a few
# hundred thousand elements a kernel is latency-bound; GB/s means something
# only at the large sizes, and comparing two kernels at small sizes compares
# their floors. That is why small operations are worth fusing.
#
# ## 7. The common mistakes, in one list
#
# | Mistake | What you measure instead | Cure |
# |---|---|---|
# | No synchronisation around a host timer | the launch | `torch.cuda.synchronize()`, or events |
# | Timing the first call | the compiler | warm up |
# | Mean of one run, or a mean at all | luck, and the stalls | many samples; median with p20/p80 |
# | Same small input every call | L2 bandwidth | flush or rotate copies |
# | Freeing each output before the next call | writes into an L2-hot recycled buffer | keep outputs alive (our harness does) |
# | Inputs of zeros | data-dependent speed, and hidden bugs | random inputs: `academy.testing.random_tensor` |
# | Host-timed calls that launch many kernels | Python | CUDA graphs, or a profiler |
# | Different methods for the two sides | the method | time every provider the same way |
# | Providers timed one after another, or in a fixed order | the clock state the previous kernel left | interleave them, in a random order each round |
#
# Zeros deserve a word. A kernel fed zeros can finish sooner than one fed
# real data (less switching activity means less power, and the GPU holds
# higher clocks; some hardware compresses all-zero data), and a kernel that
# writes nothing at all into a zero-initialised buffer "matches" a reference
# that is zero too. Random inputs make the time representative and the
# correctness check meaningful.
#
# ## 8. The profiler: which kernels ran, and for how long
#
# A timer gives one number for a whole call. `torch.profiler` lists every
# operator and, on a GPU (`ProfilerActivity.CUDA`), every kernel launched,
# with its device time. That is how you find out that an innocent-looking
# line launched nine kernels, or that most of the time went to a copy. Here
# is the op-by-op tanh GeLU, profiled on the CPU; on a GPU add
# `ProfilerActivity.CUDA` and sort by `"cuda_time_total"`, and the kernel
# names appear (a Triton kernel under its function name, a cuBLAS one under
# a name that spells out its architecture, data type and tile shape).

# %%
from torch.profiler import ProfilerActivity, profile

from examples.measuring.answers import quiet_native_stderr


def naive_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


x = torch.randn(256, 256, device=academy.DEVICE)
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if academy.DEVICE == "cuda" else [])
naive_gelu(x)
with quiet_native_stderr(), profile(activities=activities) as prof:
    for _ in range(3):
        naive_gelu(x)
sort_key = "cuda_time_total" if academy.DEVICE == "cuda" else "cpu_time_total"
table = prof.key_averages().table(sort_by=sort_key, row_limit=6)
print("\n".join(line for line in table.splitlines() if "Self CPU time total" not in line))

# %% [markdown]
# Read the `# of Calls` column: three calls of the function ran many `aten::mul`
# and `aten::add` calls: on a GPU, each a kernel reading and writing the whole
# tensor. (The times in this table are this build machine's CPU; the column to
# trust is the count.) For a timeline, `prof.export_chrome_trace(path)` writes
# a file for `chrome://tracing` or Perfetto; for hardware counters (achieved
# bandwidth, occupancy, stalls), NVIDIA's Nsight Systems and Nsight Compute.
#
# ## 9. Reading what the compiler produced
#
# Triton compiles a kernel in stages: Triton IR, TritonGPU IR, LLVM IR, then
# **PTX** (NVIDIA's portable assembly, with unlimited virtual registers), and
# `ptxas` turns PTX into a **cubin** whose machine code is **SASS**. Every
# stage is kept: the object a launch returns, or `kernel.warmup(...)`, has an
# `asm` dict (`"ttir"`, `"ttgir"`, `"llir"`, `"ptx"`, `"cubin"`, and `"sass"`
# on demand), plus `n_regs` and `n_spills` once it is loaded on the GPU.
# `examples.measuring.asm.compile_kernel(kernel, *args, **meta)` wraps that, and
# `examples.measuring.asm.dump(slug, kernel_name)` writes a summary to
# `examples/<slug>/asm/<gpu>.asm.json` for this page. What to look for:
#
# - `%ctaid.x` is the program id (the CUDA *block* index) and `%tid.x` the
#   thread index within the block: Triton's one "program" is one block of
#   `32 × num_warps` threads;
# - `ld.global` / `st.global` are the loads and stores to HBM. A suffix
#   `.v4.b32` means one instruction moves four 32-bit values, 16 bytes, per
#   thread: the widest access an H100 has, and the one you want in a
#   memory-bound kernel. A leading `@%p1` is the predicate: the mask;
# - `.reg .b32 %r<n>`, `.reg .b64 %rd<n>`, `.reg .pred %p<n>`: the virtual
#   register families, named by width, not type (`%rs` 16-bit, `%r` 32-bit
#   integers *and* floats, `%rd` 64-bit addresses, `%p` predicates; the PTX
#   of Triton 3.6 has no separate `%f` family for floats);
# - **`n_regs`**: the real registers per thread that `ptxas` allocated. An
#   SM has 65,536 registers, so 128 registers per thread caps it at 512
#   resident threads; and **`n_spills`**: values that did not fit and went
#   to (slow) local memory. A spill count above zero is worth a look.
#
# The listing below is read from the committed file of a chapter kernel.

# %%
from examples.measuring.asm import load_asm

LISTED = [("gelu", "gelu_kernel"), ("vector_add", "add_kernel")]
shown = 0
for slug, kernel_name in LISTED:
    for record in load_asm(slug):
        if record.get("kernel") != kernel_name:
            continue
        shown += 1
        accesses = record["ptx_global_accesses"]
        print(f"{slug}.{kernel_name} on {record['gpu']} (Triton {record['triton']})")
        print(
            f"  registers per thread: {record['n_regs']}, spills: {record['n_spills']}, "
            f"warps per program: {record['num_warps']}"
        )
        for access in accesses:
            print(
                f"  {access['op']}.global: {access['vector']} × {access['bits']}-bit = "
                f"{access['vector'] * access['bits'] // 8} bytes per thread per instruction"
                f"{' (masked)' if access['predicated'] else ''}"
            )
        print("  PTX lines of interest:")
        print("\n".join("    " + line for line in record["ptx_lines"]))
        if record.get("sass"):
            print(f"  SASS ({record['sass_instruction_count']} instructions), excerpt:")
            print("\n".join("    " + line for line in record["sass"][:16]))
        print()
if not shown:
    print(
        "No PTX/SASS listing is committed yet: the listing appears here after "
        "examples.measuring.asm.dump(...) has been run on a GPU (see examples/measuring/asm.py)."
    )

# %% [markdown]
# Count the elements per thread yourself: a program of `BLOCK_SIZE` elements
# run by `32 × num_warps` threads gives each thread `BLOCK_SIZE / (32 ×
# num_warps)` elements, which the compiler loads in as few 16-byte
# instructions as it can. When the PTX shows scalar `ld.global.b32` instead
# of `.v4`, the compiler could not prove the addresses contiguous and
# aligned, a common and silent loss of bandwidth.

# %% [markdown]
# ## 10. How a time grows with the problem
#
# A sweep over sizes shows where the floor of section 6 ends. A matmul of
# $n \times n$ by $n \times n$ does $2n^3$ FLOPs, so once the tensor cores
# are busy its time should grow eightfold per doubling of $n$; below that,
# it barely moves. Here are cuBLAS's medians from the matmul chapter's
# committed H100 results (CUDA-graph replays, so no launch cost is in them):

# %%
matmul_files = chapter("matmul").results_files()
if matmul_files:
    rows = sorted(
        (
            r
            for r in load(matmul_files[0]).rows
            if r.provider == "cublas" and r.sweep == "square" and r.dtype == "bfloat16"
        ),
        key=lambda r: r.params["N"],
    )
    previous = None
    for row in rows:
        n = row.params["N"]
        growth = f"   x{row.ms / previous.ms:4.1f} for x{n / previous.params['N']:.0f} in n" if previous else ""
        print(f"n = {n:5d}: {row.ms * 1e3:9.1f} µs, {row.rate:6.0f} TFLOP/s{growth}")
        previous = row
else:
    print("matmul has no committed results yet")

# %% [markdown]
# Read the growth column against 8: where it is well below, the GPU was not
# full (too few tiles for the SMs, or a fixed cost); where it is close, the
# time is the arithmetic. On the smallest sizes a host-timed measurement
# would show an even flatter curve, since the launch itself, several
# microseconds, would dominate.
#
# ## 11. Two more tools: a PyTorch timer and Nsight
#
# **`torch.utils.benchmark.Timer`** is PyTorch's `timeit`. It takes a
# statement and its globals, runs it in loops, and (when CUDA is present)
# synchronises the device before reading the host clock at both ends, so a
# measurement includes the device work. `blocked_autorange` picks the number
# of loops per sample itself and returns a `Measurement` with the median and
# the interquartile range; `benchmark.Compare` prints several measurements
# as one table. What it does not do: flush L2 or rotate inputs (section 4),
# or remove the host's launch cost (section 5). It is a good first tool for
# comparing two versions of the same Python call; for a kernel's own time,
# use events, `do_bench` or graphs. It runs on the CPU too:

# %%
from torch.utils import benchmark

x = torch.randn(256, 256, device=academy.DEVICE)
measurements = [
    benchmark.Timer(
        stmt=stmt,
        globals={"naive_gelu": naive_gelu, "F": torch.nn.functional, "x": x},
        label="tanh GeLU, 256 x 256",
        description=name,
    ).blocked_autorange(min_run_time=0.2)
    for name, stmt in (("op by op", "naive_gelu(x)"), ("built-in", "F.gelu(x, approximate='tanh')"))
]
for m in measurements:
    print(
        f"{m.description:9s}: median {m.median * 1e6:8.1f} µs, IQR {m.iqr * 1e6:6.1f} µs "
        f"over {len(m.times)} samples (this machine's CPU)"
    )

# %% [markdown]
# **Nsight Systems** (`nsys profile -o trace python train.py`) records a
# timeline of the whole program: every kernel, copy and synchronisation on
# the GPU's streams next to the Python thread that launched them. It
# answers "where does the time go, and is the GPU ever idle?": gaps between
# kernels are host overhead, and a stream of tiny kernels is a fusion
# opportunity. **Nsight Compute** (`ncu --set full -k regex:gelu python
# script.py`) replays one kernel many times under hardware counters and
# reports, among much else, achieved DRAM throughput against peak, achieved
# occupancy and its limiter (registers, shared memory, block size), and
# what the warps were stalled on. Reach for it when a kernel sits below its
# roofline and the checks of [the GPU page](../gpu_model/#why-is-my-kernel-slow)
# do not say why. Both need the GPU and NVIDIA's tools; neither runs here.
#
# **Reading a library kernel's name.** In a profiler table, cuBLAS and
# CUTLASS kernels carry their configuration in their names: the target
# architecture (`sm80`, `sm90`, `sm100`), the datapath (`simt` for the
# ordinary FP32 units, tokens such as `tensorop` or `gmma` for tensor
# cores), the data types (`f16`, `bf16`, `f32`), the operand layouts (`nn`,
# `nt`, `tn`), and the tile, such as `64x64x16` for
# $B_M \times B_N \times B_K$. A `simt` `f32` kernel under an fp32 matmul
# says the tensor cores were not used at all (TF32 off); a small tile on a
# large problem says the library's heuristic expected little parallelism.
# `torch.profiler` can also be asked for more detail per event: the
# university lecture on benchmarking and Triton kernels (`lecture_06.py`)
# this tutorial draws on passes the private
# `experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True)`
# for that, a switch that may change between PyTorch releases.

# %% [markdown]
# ## Exercises
#
# **1. An honest timer.** Write `time_kernel(gpu, name, work_ms, *, warmup=3,
# reps=20)` that returns one host-measured time per call on a
# `SimulatedGPU`, with compilation excluded and the device work included,
# and unaffected by work someone else queued before you started.

# %%
answer("examples/measuring/answers.py:answer_time_kernel")

# %% [markdown]
# **2. Quantiles by hand.** Write `summarize(samples, quantiles=(0.5, 0.2,
# 0.8))` without NumPy, interpolating linearly between sorted samples as
# `numpy.quantile` does by default.

# %%
answer("examples/measuring/answers.py:answer_summarize")

# %% [markdown]
# **3. Enough copies.** A call reads `bytes_per_call` bytes. How many copies
# of its inputs must a benchmark rotate through so their total is at least
# `multiple` times the L2 size (at least one copy, at most `max_copies`)?
# Check: a 12 MiB call on a 50 MiB L2 with `multiple=4` needs 17.

# %%
answer("examples/measuring/answers.py:answer_copies")

# %%
from examples.measuring.answers import copies_to_leave_l2, summarize, time_kernel

assert copies_to_leave_l2(12 * 2**20, 50 * 2**20) == 17
assert summarize([4.0, 1.0, 3.0, 2.0]) == tuple(np.quantile([1, 2, 3, 4], [0.5, 0.2, 0.8]))
honest = time_kernel(SimulatedGPU(compile_ms=50.0), "k", 0.2)
print(f"honest timer: median {np.median(honest):.3f} ms for 0.2 ms of work and a 5 µs launch")
