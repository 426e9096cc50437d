"""Measure a chapter on a GPU and write its results file.

For every case of the chapter's spec, each provider is first checked against
the reference on the case's inputs (a fast wrong kernel is not a result), then
timed with ``triton.testing.do_bench``: warm-up, an L2 flush before every
call, and the median with the 20th and 80th percentiles. The ceilings are
measured in the same run, so each rate is divided by a ceiling of the same
machine on the same day.
"""

from __future__ import annotations

import importlib
import platform
from collections.abc import Callable, Sequence

import torch
import triton
from triton.testing import do_bench

from academy.bench.results import Ceilings, Provenance, Results, Row
from academy.bench.spec import BenchSpec, Case
from academy.chapters import chapter
from academy.env import git_commit, gpu_driver, utc_now
from academy.testing import random_tensor, rel_l2_error, tolerance

COPY_BYTES = 1 << 30  # 1 GiB: far larger than any L2
MATMUL_SIZE = 8192
QUANTILES = (0.5, 0.2, 0.8)


def load_spec(slug: str) -> BenchSpec:
    chapter(slug)  # clear error for an unknown slug
    return importlib.import_module(f"examples.{slug}.bench").SPEC


def time_ms(fn: Callable[[], object], grad_to_none: Sequence[torch.Tensor] = ()) -> tuple[float, float, float]:
    """(median, p20, p80) in milliseconds."""
    median, p20, p80 = do_bench(fn, warmup=25, rep=100, grad_to_none=list(grad_to_none) or None, quantiles=list(QUANTILES))
    return median, p20, p80


def measure_ceilings() -> Ceilings:
    """A large device-to-device copy (bytes read + written) and a large bf16 matmul."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    copy_ms, _, _ = time_ms(lambda: dst.copy_(src))
    del src, dst
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    matmul_ms, _, _ = time_ms(lambda: a @ b)
    del a, b
    torch.cuda.empty_cache()
    return Ceilings(
        copy_gbps=2 * COPY_BYTES / copy_ms / 1e6,
        matmul_tflops=2 * MATMUL_SIZE**3 / matmul_ms / 1e9,
        copy_bytes=COPY_BYTES,
        matmul_size=MATMUL_SIZE,
    )


def provenance(slug: str) -> Provenance:
    props = torch.cuda.get_device_properties(0)
    commit, dirty = git_commit()
    return Provenance(
        gpu=props.name,
        sm_count=props.multi_processor_count,
        driver=gpu_driver(),
        cuda=str(torch.version.cuda),
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        date=utc_now(),
        git_commit=commit,
        git_dirty=dirty,
        kernel_hash=chapter(slug).code_hash(),
    )


class WrongResult(AssertionError):
    pass


def _outputs_and_grads(op: Callable, inputs: tuple[torch.Tensor, ...], grad: torch.Tensor | None) -> list[torch.Tensor]:
    for t in inputs:
        t.grad = None
    out = op(*inputs)
    if grad is None:
        return [out.detach()]
    out.backward(grad)
    return [out.detach()] + [t.grad for t in inputs if t.requires_grad]


def _verify(op, reference, inputs, grad, dtype) -> float:
    got = _outputs_and_grads(op, inputs, grad)
    expected = _outputs_and_grads(reference, inputs, grad)
    errors = [rel_l2_error(g, e) for g, e in zip(got, expected)]
    worst = max(errors)
    if not worst <= tolerance(dtype):  # NaN fails too
        raise WrongResult(f"relative L2 error {worst:.2e} > {tolerance(dtype):.0e}")
    return worst


def _thunk(op, inputs, grad) -> Callable[[], object]:
    if grad is None:
        return lambda: op(*inputs)
    return lambda: op(*inputs).backward(grad)


def run_case(spec: BenchSpec, case: Case, ops: dict[str, Callable], ceiling: float) -> tuple[list[Row], dict[str, str]]:
    torch._dynamo.reset()  # each case compiles afresh, never hitting the recompile limit
    inputs = spec.make_inputs(case, "cuda")
    grad = None
    if case.mode == "fwd+bwd":
        inputs = tuple(t.requires_grad_() if t.is_floating_point() else t for t in inputs)
        grad = random_tensor(tuple(spec.reference(*inputs).shape), case.dtype, device="cuda")
    differentiable = [t for t in inputs if t.requires_grad]
    rows, failures = [], {}
    for name, op in ops.items():
        try:
            error = _verify(op, spec.reference, inputs, grad, case.dtype)
        except WrongResult as wrong:
            if name == "academy":
                raise WrongResult(f"our kernel is wrong on {case}: {wrong}") from None
            failures[name] = f"wrong result on {dict(case.params)} {case.dtype_name} {case.mode}: {wrong}"
            continue
        median, p20, p80 = time_ms(_thunk(op, inputs, grad), differentiable)
        work = spec.work(case)
        rate = work / median / (1e6 if spec.metric == "bandwidth" else 1e9)
        rows.append(Row(
            sweep=case.sweep, x=case.x, params=dict(case.params), dtype=case.dtype_name, mode=case.mode,
            provider=name, ms=median, ms_p20=p20, ms_p80=p80, work=work, rate=rate,
            fraction_of_ceiling=rate / ceiling, max_rel_error=error,
        ))
    del inputs, grad, differentiable
    torch.cuda.empty_cache()
    return rows, failures


def run(slug: str, *, quick: bool = False, progress: bool = True) -> Results:
    """Measure every case of a chapter's spec; return the results (not yet saved)."""
    from tqdm.auto import tqdm

    spec = load_spec(slug)
    if not torch.cuda.is_available():
        raise RuntimeError("benchmarks need a CUDA GPU; on this machine the site shows committed results")
    ops, skipped = {}, {}
    for name, load in spec.providers.items():
        op = load()
        if op is None:
            skipped[name] = "not installed"
        else:
            ops[name] = op
    ceilings = measure_ceilings()
    ceiling = ceilings.copy_gbps if spec.metric == "bandwidth" else ceilings.matmul_tflops
    rows: list[Row] = []
    cases = list(spec.cases(quick=quick))
    for case in tqdm(cases, desc=slug, unit="case", disable=not progress):
        case_rows, failures = run_case(spec, case, ops, ceiling)
        rows += case_rows
        skipped.update(failures)
    return Results(slug=slug, metric=spec.metric, provenance=provenance(slug), ceilings=ceilings, rows=rows, skipped=skipped)
