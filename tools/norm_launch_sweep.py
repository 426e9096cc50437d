"""RMSNorm and LayerNorm on model-zoo widths: which launch of the in-register kernels is fastest.

    PYTHONPATH=. python3 tools/norm_launch_sweep.py OUT.jsonl [--max-s 300]

The backward of both norms (``examples/norms/launch.py``) runs a persistent grid, each program
walking row tiles of BLOCK_M whole rows held in registers. At 16384 × 5120 (bf16) RMSNorm's
forward+backward once took 1.55× its time at 4096 for 1.25× the bytes. This sweep times, per
width, RMSNorm's backward under every (BLOCK_M, warps, programs per SM) launch, with both of its
loops: the one that loads the next tile before working on this one (``prefetch``) and the one that
loads it after (``load_after``, the loop the chapter had before). The forward is timed under every
(BLOCK_M, warps) at the narrow widths, where LayerNorm's forward trails ``torch.compile``. All
variants of one width and mode run in one ``run_case`` (same-run ratios, the bench's CUDA-graph
timing, each checked against the chapter's reference), beside ``torch.compile``. One JSON line per
case: times in µs by provider.

``norm_launch_sweep.h200.jsonl`` beside this file is the run of this script as it stood at commit
12d47a4, on an NVIDIA H200 (132 SMs) on 2026-11-28, torch 2.11, Triton 3.6: the six RMSNorm
backward widths it reached in its time limit ("left" lines name the cases it did not). There the
two loops were separate kernels in this file (``plain`` is ``load_after``), and a third,
``staged``, ran the old loop under ``tl.range(num_stages=2)``: slower than ``plain`` at every
width, so it is gone. ``BWD_TILE_ELEMENTS_PER_SM`` and the prefetching loop of both norms'
backward kernels come from that run.
"""

import functools
import json
import sys
import time

import academy  # noqa: F401  (sets TRITON_INTERPRET on CPU before triton loads)

import torch
import triton

from examples.layer_norm import bench as ln_bench
from examples.layer_norm import kernel as ln
from examples.rms_norm import bench as rms_bench
from examples.rms_norm import kernel as rms

ROWS = 16384
BACKWARD_WIDTHS = (5120, 768, 2048, 8192, 4096, 896, 3584, 2304)
FORWARD_WIDTHS = (768, 896, 1600, 2048)


LOOPS = {"prefetch": rms.MAX_FUSED_COLS, "load_after": 0}
"""The backward's two loops, as RMSNorm's PREFETCH_MAX_COLS chooses them: every row prefetches, or none."""
DEFAULTS = {
    rms: {
        "forward_launch": rms.forward_launch,
        "backward_launch": rms.backward_launch,
        "PREFETCH_MAX_COLS": rms.PREFETCH_MAX_COLS,
    },
    ln: {"forward_launch": ln.forward_launch, "backward_launch": ln.backward_launch},
}


def restore(module, **overrides):
    for name, value in {**DEFAULTS[module], **overrides}.items():
        setattr(module, name, value)


def configured(module, op, **overrides):
    """``op`` with the module's launch functions (and kernels) replaced while it runs and while
    autograd runs its backward: set on every call, so each provider sets all of them."""

    def run(*args):
        restore(module, **overrides)
        return op(*args)

    return run


def tile(n_cols, block_m, per_thread):
    block_n = triton.next_power_of_2(n_cols)
    warps = block_m * block_n // (32 * per_thread)
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps} if 1 <= warps <= 32 else None


def backward_variants(n_cols, sms):
    ops = {}
    for block_m in (1, 2, 4):
        for per_thread in (8, 16, 32):
            config = tile(n_cols, block_m, per_thread)
            if config is None or block_m * config["BLOCK_N"] > 8192:
                continue
            tiles = triton.cdiv(ROWS, block_m)
            for per_sm in (1, 2, 4, 8):
                if per_sm * config["num_warps"] > 64:
                    continue
                programs = min(tiles, sms * per_sm)
                for loop, max_cols in LOOPS.items():
                    launch = functools.partial(lambda p, c, *_: ("registers", p, c), programs, config)
                    name = f"m{block_m}w{config['num_warps']}p{per_sm}:{loop}"
                    ops[name] = configured(rms, rms.rms_norm, backward_launch=launch, PREFETCH_MAX_COLS=max_cols)
    return ops


def forward_variants(module, op, n_cols):
    ops = {}
    for block_m in (1, 2, 4, 8):
        for per_thread in (4, 8, 16):
            config = tile(n_cols, block_m, per_thread)
            if config is None:
                continue
            launch = functools.partial(lambda c, n_rows, *_: (True, triton.cdiv(n_rows, c["BLOCK_M"]), c), config)
            ops[f"m{block_m}w{config['num_warps']}"] = configured(module, op, forward_launch=launch)
    return ops


def main():
    out, max_s = sys.argv[1], float(sys.argv[sys.argv.index("--max-s") + 1]) if "--max-s" in sys.argv else 300
    from academy.bench.runner import measure_ceilings, run_case
    from academy.bench.spec import Case

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ceilings = measure_ceilings()
    started = time.perf_counter()
    jobs = [("rms_norm", rms_bench.SPEC, "fwd+bwd", n) for n in BACKWARD_WIDTHS]
    jobs += [("layer_norm", ln_bench.SPEC, "fwd", n) for n in FORWARD_WIDTHS]
    jobs += [("rms_norm", rms_bench.SPEC, "fwd", n) for n in FORWARD_WIDTHS[:2]]
    with open(out, "w") as f:
        for slug, spec, mode, n_cols in jobs:
            if time.perf_counter() - started > max_s:
                f.write(json.dumps({"left": [slug, mode, n_cols]}) + "\n")
                continue
            module, op = (rms, rms.rms_norm) if slug == "rms_norm" else (ln, ln.layer_norm)
            ops = {"academy": configured(module, op), "compile": spec.providers["compile"]()}
            ops.update(backward_variants(n_cols, sms) if mode == "fwd+bwd" else forward_variants(module, op, n_cols))
            case = Case("launch", "N", {"M": ROWS, "N": n_cols}, torch.bfloat16, mode)
            try:
                rows, failures = run_case(spec, case, ops, ceilings)
            except Exception as err:
                torch.cuda.synchronize()
                f.write(json.dumps({"slug": slug, "mode": mode, "N": n_cols, "error": str(err)[:300]}) + "\n")
                continue
            us = {r.provider: round(r.ms * 1e3, 2) for r in rows}
            rec = {"slug": slug, "mode": mode, "M": ROWS, "N": n_cols, "sms": sms, "us": us, "failures": failures}
            rec["t"] = round(time.perf_counter() - started)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            best = min((p for p in us if p != "compile"), key=us.get)
            print(slug, mode, n_cols, "compile", us["compile"], "academy", us["academy"], "best", best, us[best])
    restore(rms)
    restore(ln)


if __name__ == "__main__":
    main()
