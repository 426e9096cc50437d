"""Stream-K for short prefills: every SM gets the same share of the K steps, whatever the tile count.

    PYTHONPATH=. python3 tools/matmul_stream_k.py OUT.jsonl [--max-s 480]

At M = 128 the matmul chapter's best tiles for Qwen2.5-7B's qkv weight (N = 4608, K = 3584) are
72 tiles of 64×128: one wave that leaves 60 of an H200's 132 SMs idle, at 0.906× cuBLAS; split-K
over whole tiles gives 144 units, one wave and a sliver (tools/matmul_prefill_tiles.py). Stream-K
(Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix
Multiplication on the GPU", 2023) cuts the tiles' K loops into one stream of K steps and gives
each of P programs an equal, contiguous run of it. A run that covers a whole tile stores it; the
pieces of a cut tile add their fp32 sums into a workspace tile, and the piece that completes the
tile's count of K steps (an atomic counter per tile) converts the sum and stores it.

This file holds that kernel and a sweep that times it, under a few tiles and grid sizes, beside
cuBLAS and the chapter's dispatch on the underfilled zoo weights at M = 128 and 256, in one
``run_case`` per shape (same-run ratios, the bench's timing, each checked against the fp32
reference). One JSON line per shape: times in µs by provider. The workspace and counters are
zeroed by ``torch.zeros`` on every call, which the times include.
"""

import argparse
import functools
import itertools
import json
import time

import academy  # noqa: F401  (sets TRITON_INTERPRET on CPU before triton loads)

import torch
import triton
import triton.language as tl

from examples.matmul import kernel as mm
from examples.matmul.bench import make_inputs, work


@triton.jit
def stream_k_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    partial_ptr,  # fp32 (tiles, BLOCK_M, BLOCK_N), zeroed: the cut tiles' sums
    count_ptr,  # int32 (tiles,), zeroed: K steps added into each tile so far
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    tiles_n = tl.cdiv(N, BLOCK_N)
    steps = tl.cdiv(K, BLOCK_K)  # K steps per tile
    total = tl.cdiv(M, BLOCK_M) * tiles_n * steps
    pid = tl.program_id(0).to(tl.int64)
    step = pid * total // tl.num_programs(0)  # this program's run of the stream: [step, end)
    end = (pid + 1) * total // tl.num_programs(0)
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    while step < end:
        tile = step // steps
        first = step - tile * steps
        last = tl.minimum(steps, first + end - step)
        rows = (tile // tiles_n) * BLOCK_M + rm
        cols = (tile % tiles_n) * BLOCK_N + rn
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k_step in range(first, last):
            ks = k_step * BLOCK_K + rk
            a = tl.load(
                a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                mask=(rows < M)[:, None] & (ks < K)[None, :],
                other=0.0,
            )
            b = tl.load(
                b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                mask=(ks < K)[:, None] & (cols < N)[None, :],
                other=0.0,
            )
            acc = tl.dot(a, b, acc)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        c_mask = (rows < M)[:, None] & (cols < N)[None, :]
        if last - first == steps:  # the whole tile: nobody else adds to it
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
        else:
            partial = partial_ptr + tile * BLOCK_M * BLOCK_N + rm[:, None] * BLOCK_N + rn[None, :]
            tl.atomic_add(partial, acc, sem="relaxed")
            tl.debug_barrier()  # every thread's sums are in before the count says so
            done = tl.atomic_add(count_ptr + tile, last - first, sem="acq_rel") + last - first
            if done == steps:  # every piece's sum is in: this piece stores the tile
                total_acc = tl.load(partial, cache_modifier=".cg")
                tl.store(c_ptrs, total_acc.to(c_ptr.dtype.element_ty), mask=c_mask)
        step += last - first


def stream_k_matmul(a, b, *, programs, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages):
    (M, K), N = a.shape, b.shape[1]
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    partial = torch.zeros((tiles, BLOCK_M, BLOCK_N), dtype=torch.float32, device=a.device)
    count = torch.zeros(tiles, dtype=torch.int32, device=a.device)
    stream_k_kernel[(programs,)](
        a,
        b,
        c,
        partial,
        count,
        M,
        N,
        K,
        *a.stride(),
        *b.stride(),
        *c.stride(),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return c


SHAPES = [(128, 4608, 3584), (128, 4800, 1600), (128, 4096, 14336), (128, 6144, 4096), (256, 4608, 3584)]
"""(M, N, K): the zoo weights whose tile grid leaves SMs idle at M = 128 (Qwen2.5-7B qkv, GPT-2 XL
qkv, Llama-3.1-8B down, Llama-3.1-8B qkv) and one at M = 256."""
TILES = {
    "64x128k64": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
    "64x128k128": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=3),
    "128x128k64": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4),
    "64x64k128": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
}


def candidates(sms):
    ops = {"academy": mm.matmul, "cublas": torch.matmul}
    for (name, tile), per_sm in itertools.product(TILES.items(), (1, 2)):
        ops[f"stream_k:{name}p{per_sm}"] = functools.partial(stream_k_matmul, programs=sms * per_sm, **tile)
    return ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--max-s", type=float, default=480, help="start no shape after this many seconds")
    args = parser.parse_args()
    from academy.bench.runner import measure_ceilings, run_case
    from academy.bench.spec import BenchSpec, Case, Sweep

    dtype = torch.float16
    spec = BenchSpec(
        slug="matmul",
        metric="compute",
        sweeps=[Sweep("stream-k", x="N", shapes=[])],
        dtypes=[dtype],
        modes=["fwd"],
        make_inputs=make_inputs,
        work=work,
        reference=mm.reference,
        providers={},
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ceilings = measure_ceilings()
    started = time.perf_counter()
    with open(args.out, "w") as f:
        for M, N, K in SHAPES:
            if time.perf_counter() - started > args.max_s:
                f.write(json.dumps({"left": [M, N, K]}) + "\n")
                continue
            case = Case("stream-k", "N", {"M": M, "N": N, "K": K}, dtype, "fwd", "compute", None, "")
            rows, failures = run_case(spec, case, candidates(sms), ceilings)
            us = {r.provider: round(r.ms * 1e3, 2) for r in rows}
            rec = {"M": M, "N": N, "K": K, "sms": sms, "us": us, "failures": failures}
            f.write(json.dumps({**rec, "t": round(time.perf_counter() - started)}) + "\n")
            f.flush()
            best = min((p for p in us if p.startswith("stream_k")), key=us.get)
            print(M, N, K, "cublas", us["cublas"], "academy", us["academy"], "best", best, us[best], flush=True)


if __name__ == "__main__":
    main()
