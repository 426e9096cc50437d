"""RMSNorm and LayerNorm on model-zoo widths: which launch of the in-register kernels is fastest.

    PYTHONPATH=. python3 tools/norm_launch_sweep.py OUT.jsonl [--max-s 300]

The backward of both norms (``examples/norms/launch.py``) runs a persistent grid of
``BWD_PROGRAMS_PER_SM`` programs per SM, each walking row tiles of BLOCK_M whole rows held in
registers. At 16384 × 5120 (bf16) RMSNorm's forward+backward took 1.55× its time at 4096 for
1.25× the bytes. This sweep times, per width, the backward under every (BLOCK_M, warps,
programs) launch, with three loops: the chapter's (``plain``), one that loads the next tile
before working on this one (``prefetch``: twice the bytes in flight per program), and the
chapter's loop under ``tl.range(num_stages=2)`` (``staged``: whatever Triton's pipeliner makes of
it). The forward is timed under every (BLOCK_M, warps) at the narrow widths, where LayerNorm's
forward trailed ``torch.compile``. All variants of one width and mode run in one ``run_case``
(same-run ratios, the bench's CUDA-graph timing, each checked against the chapter's reference),
beside ``torch.compile``. One JSON line per case: times in µs by provider.

``norm_launch_sweep.h200.jsonl`` beside this file is its run on an NVIDIA H200 (132 SMs) on
2026-11-28 at commit 12d47a4, torch 2.11, Triton 3.6: the six RMSNorm backward widths it reached in
its time limit ("left" lines name the cases it did not). ``BWD_TILE_ELEMENTS_PER_SM`` and the
prefetching loop of both norms' backward kernels come from it.
"""

import functools
import json
import sys
import time

import torch
import triton
import triton.language as tl

from examples.layer_norm import bench as ln_bench
from examples.layer_norm import kernel as ln
from examples.rms_norm import bench as rms_bench
from examples.rms_norm import kernel as rms

ROWS = 16384
BACKWARD_WIDTHS = (5120, 768, 2048, 8192, 4096, 896, 3584, 2304)
FORWARD_WIDTHS = (768, 896, 1600, 2048)


@triton.jit
def backward_prefetch_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    rstd_ptr,
    dw_partial_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK_M
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + offsets * x_row_stride + cols[None, :], mask=mask, other=0.0)
    dy = tl.load(dy_ptr + offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0)
    for start in range(pid * BLOCK_M, n_rows, step):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None]
        next_mask = (rows + step < n_rows)[:, None] & col_mask[None, :]
        next_offsets = offsets + step
        x_next = tl.load(x_ptr + next_offsets * x_row_stride + cols[None, :], mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + next_offsets * dy_row_stride + cols[None, :], mask=next_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        xhat = x.to(tl.float32) * rstd[:, None]
        wdy = dy.to(tl.float32) * w[None, :]
        c = tl.sum(xhat * wdy, axis=1) / n_cols
        dx = (wdy - xhat * c[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy.to(tl.float32) * xhat
        x = x_next
        dy = dy_next
    tl.store(dw_partial_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(dw_acc, axis=0), mask=col_mask)


@triton.jit
def backward_staged_kernel(
    x_ptr,
    w_ptr,
    dy_ptr,
    dx_ptr,
    rstd_ptr,
    dw_partial_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    dy_row_stride,
    dx_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    num_tiles = tl.cdiv(n_rows, BLOCK_M)
    for tile in tl.range(pid, num_tiles, tl.num_programs(0), num_stages=2):
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None]
        x = tl.load(x_ptr + offsets * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets * dy_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        xhat = x * rstd[:, None]
        wdy = dy * w[None, :]
        c = tl.sum(xhat * wdy, axis=1) / n_cols
        dx = (wdy - xhat * c[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offsets * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
    tl.store(dw_partial_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(dw_acc, axis=0), mask=col_mask)


RMS_BACKWARD_KERNELS = {
    "plain": rms.rms_norm_backward_kernel,
    "prefetch": backward_prefetch_kernel,
    "staged": backward_staged_kernel,
}
DEFAULTS = {
    rms: {
        "forward_launch": rms.forward_launch,
        "backward_launch": rms.backward_launch,
        "rms_norm_backward_kernel": rms.rms_norm_backward_kernel,
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
                for loop, kernel in RMS_BACKWARD_KERNELS.items():
                    if loop == "staged" and per_sm not in (2, 4):
                        continue
                    launch = functools.partial(lambda p, c, *_: ("registers", p, c), programs, config)
                    name = f"m{block_m}w{config['num_warps']}p{per_sm}:{loop}"
                    ops[name] = configured(rms, rms.rms_norm, backward_launch=launch, rms_norm_backward_kernel=kernel)
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
