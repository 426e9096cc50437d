"""Decode split-K: the old rule against the new one (and cuBLAS) on every model-zoo projection.

Run from the repository root, with the repository on PYTHONPATH:

    PYTHONPATH=. python3 tools/matmul_split_k.py OUT.json            # GPU: time everything
    PYTHONPATH=. python3 tools/matmul_split_k.py --dry-run [--sms 132] # any machine: shapes and configs

For every distinct projection of academy.bench.models (y = x·Wᵀ, timed as A·B with A = x of M × K and
B = Wᵀ of K × N, row-major as examples/matmul/bench.py makes it; ``--layout column`` passes W.T instead)
at M = 1 and 16, in bf16 (``--dtype``), it times with the bench's own runner (academy.bench.runner.run_case:
each provider first checked against the fp32 PyTorch reference, then CUDA-graph replays over copies of the
inputs larger than 4× the L2, fraction of a copy ceiling measured in the same run):

* ``cublas``: torch.matmul;
* ``new``: matmul as shipped (the dispatch: split-K with the new decode rule);
* ``old``: matmul with the config the previous rule picked (reconstructed below, passed as config
  overrides), timed only where it differs from the new one (``--all``: everywhere);
* ``fill``: an exploratory variant, not shipped: the new rule, then short K slices (at least one pipeline
  each) wherever the grid is still under the SM count, whatever the block width; timed only where it
  differs from ``new``. It asks whether the band of grids between half and all the SMs (4608 × 3584: 72
  programs of 64 columns) would gain from splitting too.

One JSON line per shape on stdout; everything, with the ceilings and provenance, in OUT.json. Shapes
whose configs differ are timed first; ``--max-s`` stops before a case that would start past it (the
file then says which shapes were left).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import sys
import time
from dataclasses import asdict

from academy.bench.models import DECODE_TOKENS, projections

import torch
import triton

from examples.matmul import kernel as mm
from examples.matmul.bench import make_inputs as bench_inputs
from examples.matmul.bench import work

OLD_SPLIT_MIN_K = 4096


def old_blocks(N: int, K: int, sms: int) -> tuple[int, int]:
    """(BLOCK_N, SPLIT_K) of the rule before this change: narrow to 64, split K into slices of at least
    4096, narrow to 32, until the grid fills half the SMs; never a shorter slice."""
    block_n, split = 128, 1
    while triton.cdiv(N, block_n) * split < sms // 2 and block_n > 32:
        if block_n > 64:
            block_n //= 2
        elif K // (2 * split) >= OLD_SPLIT_MIN_K:
            split *= 2
        else:
            block_n //= 2
    return block_n, split


def stages_of(block_n: int) -> int:
    return mm.DECODE_NARROW_STAGES if block_n < 64 else mm.SPLIT_K_CONFIGS["decode"]["num_stages"]


def fill_blocks(N: int, K: int, block_k: int, sms: int) -> tuple[int, int]:
    """Exploratory: the new rule, then short slices (one pipeline at least) while the grid is under ``sms``."""
    block_n, split = mm.decode_blocks(N, K, block_k, mm.DECODE_NARROW_STAGES, sms)
    while triton.cdiv(N, block_n) * split < sms and K // (2 * split) >= stages_of(block_n) * block_k:
        split *= 2
    return block_n, split


@contextlib.contextmanager
def gpu_rule(sms: int):
    """split_k_config as the GPU runs it, with ``sms`` SMs (on a CPU the module is interpreted)."""
    saved = mm.INTERPRETED, mm.sm_count
    mm.INTERPRETED, mm.sm_count = False, (lambda: sms)
    try:
        yield
    finally:
        mm.INTERPRETED, mm.sm_count = saved


def describe(N: int, K: int, block_n: int, split: int, stages: int, block_k: int) -> dict:
    k_per_split = triton.cdiv(triton.cdiv(K, split), block_k) * block_k
    slices = triton.cdiv(K, k_per_split)  # what the launcher runs (a rounded-up slice may leave fewer)
    return dict(
        BLOCK_N=block_n,
        SPLIT_K=split,
        num_stages=stages,
        slices=slices,
        k_per_split=k_per_split,
        programs=triton.cdiv(N, block_n) * slices,
    )


def configs(M: int, N: int, K: int, dtype: torch.dtype, sms: int) -> dict[str, dict]:
    with gpu_rule(sms):
        shipped = mm.split_k_config(M, N, K, dtype)
    block_k = shipped["BLOCK_K"]
    old = old_blocks(N, K, sms)
    fill = fill_blocks(N, K, block_k, sms)
    return {
        "new": describe(N, K, shipped["BLOCK_N"], shipped["SPLIT_K"], shipped["num_stages"], block_k),
        "old": describe(N, K, *old, stages_of(old[0]), block_k),
        "fill": describe(N, K, *fill, stages_of(fill[0]), block_k),
    }


def overrides(cfg: dict) -> dict:
    return {"BLOCK_N": cfg["BLOCK_N"], "SPLIT_K": cfg["SPLIT_K"], "num_stages": cfg["num_stages"]}


def same(a: dict, b: dict) -> bool:
    return overrides(a) == overrides(b)


def shapes(tokens: tuple[int, ...]) -> list[tuple[int, int, int, str]]:
    return [(m, p.value.N, p.value.K, p.label) for m in tokens for p in projections()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="where to write the JSON results (GPU runs)")
    parser.add_argument("--dry-run", action="store_true", help="list shapes and configs, time nothing")
    parser.add_argument("--sms", type=int, help="SM count for --dry-run (default: this GPU's, else 132)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--layout", default="row", choices=["row", "column"], help="B as K×N, or as W.T")
    parser.add_argument("--tokens", default=",".join(map(str, DECODE_TOKENS)), help="M values, comma-separated")
    parser.add_argument("--all", action="store_true", help="time old and fill even where their config is new's")
    parser.add_argument("--no-fill", action="store_true", help="skip the exploratory fill variant")
    parser.add_argument("--max-s", type=float, default=215.0, help="start no case after this many seconds")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    tokens = tuple(int(t) for t in args.tokens.split(","))
    started = time.perf_counter()

    if args.dry_run:
        sms = args.sms or (
            torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132
        )
        changed = 0
        for m, n, k, label in shapes(tokens):
            cfgs = configs(m, n, k, dtype, sms)
            differs = not same(cfgs["old"], cfgs["new"])
            changed += differs
            print(
                json.dumps(
                    {"M": m, "N": n, "K": k, "label": label, "sms": sms, "changed": differs}
                    | {
                        name: f"{c['BLOCK_N']}x{c['SPLIT_K']} s{c['num_stages']} -> {c['programs']} programs"
                        for name, c in cfgs.items()
                    }
                )
            )
        print(f"{len(shapes(tokens))} shapes, {changed} with a new config, {sms} SMs", file=sys.stderr)
        return 0

    if not args.out:
        parser.error("OUT.json is required unless --dry-run")
    if not torch.cuda.is_available() or mm.INTERPRETED:
        parser.error("timing needs a CUDA GPU (use --dry-run here)")

    from academy.bench.runner import TIMING, measure_ceilings, provenance, run_case
    from academy.bench.spec import BenchSpec, Case, Sweep

    def make_inputs(case, device):
        a, b = bench_inputs(case, device)
        if args.layout == "column":
            b = b.T.contiguous().T  # the same values, stored as W (N × K): b = W.T
        return a, b

    spec = BenchSpec(
        slug="matmul",
        metric="bandwidth",
        sweeps=[Sweep("decode split-K", x="N", shapes=[])],
        dtypes=[dtype],
        modes=["fwd"],
        make_inputs=make_inputs,
        work=work,
        reference=mm.reference,
        providers={"academy": lambda: mm.matmul},
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ceilings = measure_ceilings()
    names = {"academy": "new", "cublas": "cublas", "academy:old": "old", "academy:fill": "fill"}

    def timed(m, n, k, label, ops) -> tuple[dict, dict, str | None]:
        """Rows by our name, failures, and the error that stopped the case (None if it ran)."""
        case = Case("decode split-K", "N", {"M": m, "N": n, "K": k}, dtype, "fwd", "bandwidth", None, label)
        try:
            case_rows, failures = run_case(spec, case, ops, ceilings)
        except Exception as err:  # our kernel wrong or failing: say so, go on with the next shape
            torch.cuda.synchronize()
            return {}, {}, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
        return {names[r.provider]: r for r in case_rows}, failures, None

    plan = []
    for m, n, k, label in shapes(tokens):
        cfgs = configs(m, n, k, dtype, sms)
        shipped = mm.split_k_config(m, n, k, dtype)  # compiled here: the real rule, the real SM count
        assert overrides(shipped) == overrides(cfgs["new"]), (m, n, k, shipped, cfgs["new"])
        assert mm.choose_path(m, n, k, torch.empty(0), torch.empty(0)) == "split_k", (m, n, k)
        plan.append((m, n, k, label, cfgs, args.all or not same(cfgs["old"], cfgs["new"])))
    plan.sort(key=lambda item: not item[5])  # the shapes whose config changed first

    # Pass 1: cuBLAS, the new rule and (where it differs) the old one, on every shape.
    rows, left = [], []
    for m, n, k, label, cfgs, time_old in plan:
        if time.perf_counter() - started > args.max_s:
            left.append({"M": m, "N": n, "K": k, "pass": 1})
            continue
        ops = {"academy": mm.matmul, "cublas": torch.matmul}
        if time_old:
            ops["academy:old"] = functools.partial(mm.matmul, path="split_k", config=overrides(cfgs["old"]))
        got, failures, error = timed(m, n, k, label, ops)
        record = {"M": m, "N": n, "K": k, "label": label, "dtype": args.dtype, "layout": args.layout, "sms": sms}
        record |= {"bytes": work(Case("", "N", {"M": m, "N": n, "K": k}, dtype, "fwd")), "configs": cfgs}
        record |= {"old_timed": time_old, "fill_timed": False}
        record["us"] = {name: r.ms * 1e3 for name, r in got.items()}
        record["us_p20"] = {name: r.ms_p20 * 1e3 for name, r in got.items()}
        record["us_p80"] = {name: r.ms_p80 * 1e3 for name, r in got.items()}
        record["copy_fraction"] = {name: r.fraction_of_ceiling for name, r in got.items()}
        record["max_rel_error"] = {name: r.max_rel_error for name, r in got.items()}
        if failures:
            record["failures"] = failures
        if error:
            record["error"] = error
        us = record["us"]
        if "new" in us:
            record["new_speedup_vs_old"] = us.get("old", us["new"]) / us["new"]  # old not timed: new's config
            if "cublas" in us:
                record["new_vs_cublas"] = us["cublas"] / us["new"]  # above 1: ours faster
        record["elapsed_s"] = round(time.perf_counter() - started, 1)
        print(json.dumps(record), flush=True)
        rows.append(record)

    # Pass 2 (exploratory): the fill variant, where its config differs from the new rule's.
    for record in [] if args.no_fill else rows:
        cfgs = record["configs"]
        if "new" not in record["us"] or (same(cfgs["fill"], cfgs["new"]) and not args.all):
            continue
        m, n, k = record["M"], record["N"], record["K"]
        if time.perf_counter() - started > args.max_s:
            left.append({"M": m, "N": n, "K": k, "pass": 2})
            continue
        fill = functools.partial(mm.matmul, path="split_k", config=overrides(cfgs["fill"]))
        got, failures, error = timed(m, n, k, record["label"], {"academy:fill": fill})
        record["fill_timed"] = True
        if "fill" in got:
            row = got["fill"]
            record["us"]["fill"] = row.ms * 1e3
            record["us_p20"]["fill"] = row.ms_p20 * 1e3
            record["us_p80"]["fill"] = row.ms_p80 * 1e3
            record["copy_fraction"]["fill"] = row.fraction_of_ceiling
            record["max_rel_error"]["fill"] = row.max_rel_error
            record["fill_speedup_vs_new"] = record["us"]["new"] / record["us"]["fill"]
        else:
            record["fill_failure"] = error or json.dumps(failures)
        print(json.dumps({"pass": 2, "M": m, "N": n, "K": k, "us": record["us"]}), flush=True)

    def geomean(values):
        values = list(values)
        return math.exp(sum(map(math.log, values)) / len(values)) if values else None

    # The cliff check: each shape against the nearest round shape (N and K multiples of 1024) by bytes,
    # at the same M, both with the new rule; time scaled by bytes = the inverse ratio of copy fractions.
    for record in rows:
        if "new" not in record["us"]:
            continue
        peers = [
            r
            for r in rows
            if r["M"] == record["M"]
            and r is not record
            and "new" in r["us"]
            and r["N"] % 1024 == 0
            and r["K"] % 1024 == 0
        ]
        if peers:
            peer = min(peers, key=lambda r: abs(math.log(r["bytes"] / record["bytes"])))
            record["round_peer"] = f"{peer['N']}x{peer['K']}"
            record["cliff_vs_round_peer"] = peer["copy_fraction"]["new"] / record["copy_fraction"]["new"]

    summary = {}
    for m in tokens:
        mine = [r for r in rows if r["M"] == m and "new" in r["us"]]
        changed = [r for r in mine if r["old_timed"] and "old" in r["us"]]
        summary[f"M={m}"] = {
            "shapes": len(mine),
            "changed": len(changed),
            "speedup_new_vs_old_on_changed_geomean": geomean(r["new_speedup_vs_old"] for r in changed),
            "new_copy_fraction_on_changed": {
                f"{r['N']}x{r['K']}": round(r["copy_fraction"]["new"], 3) for r in changed
            },
            "old_copy_fraction_on_changed": {
                f"{r['N']}x{r['K']}": round(r["copy_fraction"]["old"], 3) for r in changed
            },
            "new_vs_cublas_geomean": geomean(r["new_vs_cublas"] for r in mine if "new_vs_cublas" in r),
            "new_under_80pct_of_copy": sorted(f"{r['N']}x{r['K']}" for r in mine if r["copy_fraction"]["new"] < 0.8),
            "new_over_1.1x_slower_per_byte_than_round_peer": {
                f"{r['N']}x{r['K']}": f"{r['cliff_vs_round_peer']:.2f}x vs {r['round_peer']}"
                for r in mine
                if r.get("cliff_vs_round_peer", 0) > 1.1
            },
            "fill_speedup_vs_new": {
                f"{r['N']}x{r['K']}": round(r["fill_speedup_vs_new"], 3) for r in mine if "fill_speedup_vs_new" in r
            },
        }
    result = {
        "what": "decode split-K, old rule vs new rule vs cuBLAS, model-zoo projections",
        "provenance": asdict(provenance("matmul")),
        "ceilings": asdict(ceilings),
        "timing": TIMING,
        "args": vars(args),
        "summary": summary,
        "left_out_for_time": left,
        "wall_s": round(time.perf_counter() - started, 1),
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({"summary": summary, "left_out_for_time": len(left), "wall_s": result["wall_s"]}), file=sys.stderr)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
