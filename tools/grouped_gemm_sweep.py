"""Grouped GEMM on the bench's MoE shapes: where forward+backward loses time, and which tiles win.

    PYTHONPATH=. python3 tools/grouped_gemm_sweep.py OUT.jsonl [--max-s 480] [--products dw,dx,fwd]

On an H200 at ad53d88 our forward+backward on Mixtral-8x7B's expert projections took about 5.4 ms
against 4.5 ms for ``torch._grouped_mm`` and 4.7 ms for a per-expert cuBLAS loop, while our forward
alone was level with both. The backward is two grouped products: dX, the row-grouped kernel on the
transposed weights, and dW, a separate weight-gradient kernel; the tile configs of both
(``TILE_CONFIGS``, ``WEIGHT_GRAD_CONFIGS`` in examples/grouped_gemm/kernel.py) were never tuned on
a GPU. This sweep times the three products apart (forward, dX, dW), each in one ``run_case`` per
shape (same-run ratios, the bench's timing, every provider first checked against an fp32
reference): ours as dispatched, ours under every tile config of a small grid, and the peers that
compute the same product (``torch._grouped_mm``; for dW also one cuBLAS matmul per expert). One
JSON line per (shape, product): times in µs by provider.
"""

import argparse
import itertools
import json
import time

from academy.bench.peers import host_synchronising

import torch

from examples.grouped_gemm import bench
from examples.grouped_gemm import kernel as gg

SHAPES = [  # (model, projection) of the bench, balanced routing; the DeepSeek-V3 ones are weight-bound
    ("Mixtral-8x7B", "up"),
    ("Mixtral-8x7B", "down"),
    ("DeepSeek-V3", "up"),
    ("DeepSeek-V3", "down"),
]
SHARED_MEMORY = 220 * 1024
"""Bytes of shared memory a config's pipeline may take (an H100/H200 SM has 228 KiB)."""


def offsets(group_sizes):
    return torch.cumsum(group_sizes, 0, dtype=torch.int32)


def rows_configs():
    """Configs of the row-grouped kernel (forward and dX) that fit shared memory."""
    for bm, bn, bk, warps, stages in itertools.product((64, 128), (128, 256), (64, 128), (4, 8), (3, 4)):
        smem = stages * (bm * bk + bk * bn) * 2
        per_sm = 2 if 2 * smem <= SHARED_MEMORY and warps == 4 else 1  # two programs where two fit
        if smem <= SHARED_MEMORY and bm * bn // (32 * warps) <= 128:
            yield (
                f"m{bm}n{bn}k{bk}w{warps}s{stages}p{per_sm}",
                dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages, PROGRAMS_PER_SM=per_sm),
            )


def weight_grad_configs():
    """Configs of the weight-gradient kernel that fit shared memory and registers."""
    for bk, bn, br, warps, stages in itertools.product((64, 128, 256), (128, 256), (32, 64, 128), (4, 8), (3, 4)):
        smem = stages * (bk * br + br * bn) * 2
        if smem <= SHARED_MEMORY and bk * bn // (32 * warps) <= 128:
            yield (
                f"k{bk}n{bn}r{br}w{warps}s{stages}",
                dict(BLOCK_K=bk, BLOCK_N=bn, BLOCK_R=br, num_warps=warps, num_stages=stages),
            )


def forward_ops():
    ops = {"academy": lambda x, w, s: gg.grouped_rows(x, w, s, x.new_empty(x.shape[0], w.shape[2]))}
    if hasattr(torch, "_grouped_mm"):
        ops["grouped_mm"] = lambda x, w, s: torch._grouped_mm(x, w, offs=offsets(s))
    for name, cfg in rows_configs():
        ops[f"academy:{name}"] = lambda x, w, s, cfg=cfg: gg.grouped_rows(
            x, w, s, x.new_empty(x.shape[0], w.shape[2]), config=cfg
        )
    return ops


def input_grad_ops():
    """dX = dY @ Wᵀ per group: the forward's ops on the transposed weights."""
    return {name: (lambda dy, w, s, op=op: op(dy, w.transpose(1, 2), s)) for name, op in forward_ops().items()}


def weight_grad_ops():
    def per_expert(x, dy, s):
        dw = x.new_empty(s.shape[0], x.shape[1], dy.shape[1])
        for e, (xe, dye) in enumerate(zip(x.split(s.tolist()), dy.split(s.tolist()))):
            torch.matmul(xe.T, dye, out=dw[e])
        return dw

    def ours(x, dy, s, cfg=None):
        return gg.grouped_weight_grad(x, dy, s, x.new_empty(s.shape[0], x.shape[1], dy.shape[1]), config=cfg)

    ops = {"academy": ours, "cublas_loop": host_synchronising(per_expert)}
    if hasattr(torch, "_grouped_mm"):
        ops["grouped_mm"] = lambda x, dy, s: torch._grouped_mm(x.T, dy, offs=offsets(s))
    for name, cfg in weight_grad_configs():
        ops[f"academy:{name}"] = lambda x, dy, s, cfg=cfg: ours(x, dy, s, cfg)
    return ops


def weight_grad_reference(x, dy, s):
    parts = zip(x.float().split(s.tolist()), dy.float().split(s.tolist()))
    return torch.stack([xe.T @ dye for xe, dye in parts])


def spec_for(product):
    from academy.bench.spec import BenchSpec, Sweep

    def make_inputs(case, device):
        x, w, sizes = bench.make_inputs(case, device)
        if product == "fwd":
            return x, w, sizes
        dy = torch.empty((x.shape[0], w.shape[2]), dtype=x.dtype, device=device).normal_()
        return (dy, w, sizes) if product == "dx" else (x, dy, sizes)

    def reference(a, b, sizes):
        if product == "dw":
            return weight_grad_reference(a, b, sizes)
        return gg.reference(a, b if product == "fwd" else b.transpose(1, 2), sizes)

    return BenchSpec(
        slug="grouped_gemm",
        metric="compute",
        sweeps=[Sweep(product, x="N", shapes=[])],
        dtypes=[torch.bfloat16],
        modes=["fwd"],
        make_inputs=make_inputs,
        work=lambda case: float(gg.flops(case.params["T"], case.params["K"], case.params["N"])),
        reference=reference,
        providers={},
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--max-s", type=float, default=480, help="start no case after this many seconds")
    parser.add_argument("--products", default="dw,dx,fwd", help="which products, in this order")
    args = parser.parse_args()
    from academy.bench.runner import measure_ceilings, run_case
    from academy.bench.spec import Case

    ceilings = measure_ceilings()
    started = time.perf_counter()
    ops = {"dw": weight_grad_ops, "dx": input_grad_ops, "fwd": forward_ops}
    with open(args.out, "w") as f:
        for product, (name, projection) in itertools.product(args.products.split(","), SHAPES):
            params = bench._shape(name, projection, 0)
            if time.perf_counter() - started > args.max_s:
                f.write(json.dumps({"left": [product, name, projection]}) + "\n")
                continue
            case = Case(product, "N", params, torch.bfloat16, "fwd", "compute", None, f"{name} {projection}")
            try:
                rows, failures = run_case(spec_for(product), case, ops[product](), ceilings)
            except Exception as err:
                torch.cuda.synchronize()
                f.write(json.dumps({"product": product, **params, "error": str(err)[:300]}) + "\n")
                continue
            us = {r.provider: round(r.ms * 1e3, 1) for r in rows}
            rec = {"product": product, "model": name, "projection": projection, **params, "us": us}
            rec.update(failures=failures, t=round(time.perf_counter() - started))
            f.write(json.dumps(rec) + "\n")
            f.flush()
            best = min((p for p in us if p.startswith("academy")), key=us.get)
            print(product, name, projection, {p: us[p] for p in us if ":" not in p}, "best", best, us[best])


if __name__ == "__main__":
    main()
