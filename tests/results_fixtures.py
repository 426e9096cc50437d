"""Synthetic results for the tests of the renderer, the dashboard, the hook and the prose check.

Every number is a planted fixture value chosen so an expected output can be
worked out by hand; none of it is a published measurement.
"""

from __future__ import annotations

from academy.bench.results import Ceilings, Provenance, Results, Row


def make_row(provider, n, ms, *, m=8192, mode="fwd", dtype="bfloat16", ceiling=3000.0, sweep=None):
    work = 2.0 * m * n * 2  # read + write bf16: fixture work model
    rate = work / (ms * 1e-3) / 1e9
    return Row(
        sweep=sweep or f"M={m}",
        x="N",
        params={"M": m, "N": n},
        dtype=dtype,
        mode=mode,
        provider=provider,
        ms=ms,
        ms_p20=ms * 0.99,
        ms_p80=ms * 1.02,
        work=work,
        rate=rate,
        fraction_of_ceiling=rate / ceiling,
        max_rel_error=1e-3,
    )


def make_results(rows, *, metric="bandwidth", kernel_hash="aaaa", skipped=None, gpu="NVIDIA H100 80GB HBM3"):
    return Results(
        slug="fixture_op",
        metric=metric,
        provenance=Provenance(
            gpu=gpu,
            sm_count=132,
            driver="570.00",
            cuda="12.8",
            torch="2.11.0",
            triton="3.6.0",
            python="3.11.9",
            date="2025-01-02T03:04:05Z",
            git_commit="0123456789abcdef0123",
            git_dirty=False,
            kernel_hash=kernel_hash,
        ),
        ceilings=Ceilings(copy_gbps=3000.0, matmul_tflops=750.0, copy_bytes=4 * 2**30, matmul_size=8192),
        rows=list(rows),
        skipped=skipped or {},
    )
