"""Short-prefill matmul (M = 128 to 512): which kernel and tile fill the SMs best.

    PYTHONPATH=. python3 tools/matmul_prefill_tiles.py OUT.jsonl [--max-s 480]

Times, for 16 model-zoo weights at M = 128, 256 and 512 (fp16), cuBLAS, the dispatch, the TMA kernel
with each tile row forced, and split-K over a range of slices, all in one run_case per shape (same-run
ratios, the bench's CUDA-graph timing, each provider first checked against the fp32 reference). One JSON
line per shape: times in µs by provider.

``matmul_prefill_tiles.h200.jsonl`` beside this file is its run on an NVIDIA H200 (132 SMs) on
2026-11-28 at commit 07f9467, torch 2.11, Triton 3.6, under the dispatch before WAVE_COSTS
("academy" there is the old choice). The tile costs of examples/matmul/kernel.py come from it.
"""

import functools
import json
import sys
import time

import torch
import triton

from examples.matmul import kernel as mm
from examples.matmul.bench import make_inputs, work

PROJ = [  # (N, K)
    (576, 7168),
    (4096, 14336),
    (4608, 3584),
    (4800, 1600),
    (28672, 4096),
    (768, 768),
    (896, 4864),
    (1536, 7168),
    (2048, 2048),
    (2304, 2048),
    (3072, 8192),
    (4096, 4096),
    (6144, 4096),
    (7168, 2048),
    (8192, 8192),
    (12288, 4096),
]
TMA = {
    "t64x64": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=5),
    "t128x128": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=3),
    "t128x128w8": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4),
    "t128x64": dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
    "t64x128": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=4),
}
SPLIT = {
    "s64x64": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
    "s128x64": dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=4),
    "s64x128": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
    "s128x128": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3),
}


def candidates(M, N, K, sms):
    base = {k: v for k, v in mm.TILE_CONFIGS["medium"].items()}
    ops = {"academy": mm.matmul, "cublas": torch.matmul}
    for name, cfg in TMA.items():
        ops[f"academy:{name}"] = functools.partial(mm.matmul, path="tma", config={**base, **cfg})
    for name, cfg in SPLIT.items():
        tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
        for split in (2, 4, 8, 16):
            if sms // 2 <= tiles * split <= 3 * sms and K // split >= 2 * cfg["BLOCK_K"]:
                ops[f"academy:{name}k{split}"] = functools.partial(
                    mm.matmul, path="split_k", config={**cfg, "SPLIT_K": split, "PDL": True}
                )
    return ops


def main():
    out, max_s = sys.argv[1], float(sys.argv[sys.argv.index("--max-s") + 1]) if "--max-s" in sys.argv else 480
    from academy.bench.runner import measure_ceilings, run_case
    from academy.bench.spec import BenchSpec, Case, Sweep

    dtype = torch.float16
    spec = BenchSpec(
        slug="matmul",
        metric="compute",
        sweeps=[Sweep("prefill", x="N", shapes=[])],
        dtypes=[dtype],
        modes=["fwd"],
        make_inputs=make_inputs,
        work=work,
        reference=mm.reference,
        providers={"academy": lambda: mm.matmul},
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ceilings = measure_ceilings()
    started = time.perf_counter()
    shapes = [(128, n, k) for n, k in PROJ] + [(256, n, k) for n, k in PROJ] + [(512, n, k) for n, k in PROJ[:10]]
    with open(out, "w") as f:
        for M, N, K in shapes:
            if time.perf_counter() - started > max_s:
                f.write(json.dumps({"left": [M, N, K]}) + "\n")
                continue
            case = Case("prefill", "N", {"M": M, "N": N, "K": K}, dtype, "fwd", "compute", None, "")
            try:
                rows, failures = run_case(spec, case, candidates(M, N, K, sms), ceilings)
            except Exception as err:
                torch.cuda.synchronize()
                f.write(json.dumps({"M": M, "N": N, "K": K, "error": str(err)[:300]}) + "\n")
                continue
            us = {r.provider: round(r.ms * 1e3, 2) for r in rows}
            rec = {
                "M": M,
                "N": N,
                "K": K,
                "sms": sms,
                "us": us,
                "failures": failures,
                "auto": mm.choose_path(
                    M,
                    N,
                    K,
                    torch.empty(M, K, device="cuda", dtype=dtype),
                    torch.empty(K, N, device="cuda", dtype=dtype),
                ),
                "auto_cfg": mm.tile_class(M, N, dtype),
                "t": round(time.perf_counter() - started),
            }
            f.write(json.dumps(rec) + "\n")
            f.flush()
            best = min(us, key=us.get)
            print(M, N, K, "cublas", us.get("cublas"), "auto", us.get("academy"), "best", best, us[best], flush=True)


if __name__ == "__main__":
    main()
