"""Measure a chapter on a GPU and write its results file.

For every case of the chapter's spec, each provider is first checked against
the reference on the case's inputs (a fast wrong kernel is not a result), then
timed as described in `TIMING`. The ceilings are measured in the same
run, so each rate is divided by a ceiling of the same machine on the same day
(a resumed run measures its own, for the cases it measures).

Why CUDA graphs: on the lent machines, the CPU side of one forward+backward
through autograd (engine thread hand-off, Python ``backward``, launches) took
0.1–0.6 ms, longer than the GPU work of most cases, so host timing would
measure the host. A graph replays exactly the kernels each provider launches
and nothing else; every provider is timed the same way.
"""

from __future__ import annotations

import gc
import importlib
import platform
import random
from collections.abc import Callable, Collection, Sequence

from academy.bench.peers import peer_versions
from academy.bench.results import OURS, Ceilings, Provenance, Results, Row
from academy.bench.spec import BenchSpec, Case
from academy.chapters import chapter
from academy.env import git_commit, gpu_driver, utc_now
from academy.testing import random_tensor, rel_l2_error, tolerance

import torch
import triton
from triton.testing import do_bench

COPY_BYTES = 1 << 30  # 1 GiB: far larger than any L2
MATMUL_SIZE = 8192
QUANTILES = (0.5, 0.2, 0.8)


def load_spec(slug: str) -> BenchSpec:
    chapter(slug)  # clear error for an unknown slug
    return importlib.import_module(f"examples.{slug}.bench").SPEC


TIMING = (
    "GPU time of one call, from CUDA-graph replays: each replay runs the call once per "
    "input copy, on enough copies to exceed 4× the L2 cache, each writing its own outputs, "
    "so every call reads and writes HBM; median and 20th/80th percentiles over at least "
    "100 ms of replays, after warm-up; on compute-bound cases the providers' replays are "
    "interleaved, one each per round in a fresh random order, so that all run under "
    "the same clock states of the power-capped GPU, each after an untimed read of twice the "
    "L2 (no replay pays for another's dirty lines). Forward+backward feeds "
    "a random output gradient, or 1 to a scalar loss, as loss.backward() does."
)
L2_MULTIPLE = 4
MAX_COPIES = 64
MIN_TIMED_MS = 100.0


def time_ms(fn: Callable[[], object]) -> tuple[float, float, float]:
    """(median, p20, p80) in milliseconds, host-timed with an L2 flush before each call."""
    median, p20, p80 = do_bench(fn, warmup=25, rep=100, quantiles=list(QUANTILES))
    return median, p20, p80


def capture_graph(
    thunks: Sequence[Callable[[], object]],
    release: Callable[[], None],
    reset: Callable[[], None],
) -> torch.cuda.CUDAGraph:
    """A CUDA graph that runs every thunk once, captured after three warm-up rounds.

    ``reset`` runs before each warm-up round and before capture (e.g. clearing
    ``.grad`` so the captured backward writes fresh gradients instead of
    accumulating); ``release`` drops the outputs the thunks kept, after each
    warm-up round and after capture: the graph's pool keeps their addresses and
    each replay rewrites them.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as CUDA graphs require
        for _ in range(3):
            reset()
            for thunk in thunks:
                thunk()
            release()
    torch.cuda.current_stream().wait_stream(side)
    reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for thunk in thunks:
            thunk()
    release()
    return graph


def l2_cleaner() -> Callable[[], object]:
    """A call that reads twice the L2's size: the lines it leaves there are clean."""
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda").max


def time_graphs_ms(graphs: dict[str, tuple[torch.cuda.CUDAGraph, int]]) -> dict[str, tuple[float, float, float]]:
    """(median, p20, p80) in ms of one call for each ``name: (graph, calls per replay)``.

    The replays are interleaved, one per graph per round, so every graph is timed
    under the same mix of clock states: a power-capped GPU switches between them
    during a run, and graphs timed one after the other could each land in a
    different state. Each round runs the graphs in a fresh random order (seeded),
    so over the rounds every graph follows every other about equally often: a
    power-hungry replay slows whichever replay follows it, and a fixed cyclic
    order (even one rotated each round) puts the same graph after it nearly every
    time. Before every interleaved replay an untimed read of a buffer twice the
    L2's size writes back whatever the previous replay left dirty there: no
    replay pays for another's outputs. A graph leaves the rounds
    once it has 10 replays and ``MIN_TIMED_MS`` of them.

    A lone graph is replayed back to back with no clean read: each replay then
    pays for the last one's dirty lines, as much as it leaves for the next, as in
    a steady stream of calls. A clean read would let every replay leave up to an
    L2 of its own writes unpaid, which flatters a memory-bound call by a few percent.
    """
    clean_l2 = l2_cleaner() if len(graphs) > 1 else (lambda: None)
    needed = {}
    for name, (graph, _) in graphs.items():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        needed[name] = max(10, int(MIN_TIMED_MS / max(start.elapsed_time(end) / 5, 1e-3)))
    events: dict[str, list] = {name: [] for name in graphs}
    shuffle = random.Random(0).shuffle
    while pending := [name for name in graphs if len(events[name]) < needed[name]]:
        shuffle(pending)
        for name in pending:
            clean_l2()
            begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            graphs[name][0].replay()
            finish.record()
            events[name].append((begin, finish))
    torch.cuda.synchronize()
    timings = {}
    for name, (_, calls) in graphs.items():
        per_call = torch.tensor([begin.elapsed_time(finish) / calls for begin, finish in events[name]])
        timings[name] = tuple(torch.quantile(per_call, q).item() for q in QUANTILES)
    return timings


def time_graph_ms(
    thunks: Sequence[Callable[[], object]],
    release: Callable[[], None],
    reset: Callable[[], None],
) -> tuple[float, float, float]:
    """(median, p20, p80) in ms of one call, from replays of a graph that runs every thunk once
    ([`capture_graph`][academy.bench.runner.capture_graph] says what ``release`` and ``reset`` do)."""
    return time_graphs_ms({"": (capture_graph(thunks, release, reset), len(thunks))})[""]


def time_host_ms(
    thunks: Sequence[Callable[[], object]],
    release: Callable[[], None],
    reset: Callable[[], None],
) -> tuple[float, float, float]:
    """(median, p20, p80) in ms of one call, from CUDA events around rounds of calls
    launched from the host: for ops that synchronise with the host, which a CUDA graph
    cannot capture. Their host work between launches is part of what they cost."""

    def one_round() -> float:
        reset()
        begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for thunk in thunks:
            thunk()
        finish.record()
        torch.cuda.synchronize()
        release()
        return begin.elapsed_time(finish) / len(thunks)

    for _ in range(3):
        one_round()
    first = one_round()
    rounds = max(10, int(MIN_TIMED_MS / max(first * len(thunks), 1e-3)))
    per_call = torch.tensor([one_round() for _ in range(rounds)])
    median, p20, p80 = (torch.quantile(per_call, q).item() for q in QUANTILES)
    return median, p20, p80


def _copy_ms() -> float:
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    return time_ms(lambda: dst.copy_(src))[0]  # 2 GiB of traffic: no L2 effect to avoid


def _matmul_ms() -> float:
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    return time_ms(lambda: a @ b)[0]


def measure_ceilings() -> Ceilings:
    """A large device-to-device copy (bytes read + written) and a large bf16 matmul."""
    copy_ms = _copy_ms()  # each helper's tensors are freed when it returns
    matmul_ms = _matmul_ms()
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
        peers=peer_versions(),
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


def _fresh(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Private copies of the inputs: an op that overwrites its inputs (Liger writes the
    logits' gradient over the logits) must not change what the reference sees."""
    return tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)


def _verify(op, reference, inputs, grad, dtype) -> float:
    got = _outputs_and_grads(op, _fresh(inputs), grad)
    expected = _outputs_and_grads(reference, _fresh(inputs), grad)
    errors = [rel_l2_error(g, e) for g, e in zip(got, expected)]
    worst = max(errors)
    if not worst <= tolerance(dtype):  # NaN fails too
        raise WrongResult(f"relative L2 error {worst:.2e} > {tolerance(dtype):.0e}")
    return worst


def _thunk(op, inputs, grad, keep: list) -> Callable[[], object]:
    """One timed call. Outputs go into ``keep`` so that, while a graph is
    captured, no call's output memory is freed and handed to the next call:
    reused, L2-resident output buffers would let every provider write faster
    than HBM allows."""
    if grad is None:
        return lambda: keep.append(op(*inputs))

    def forward_backward() -> None:
        out = op(*inputs)
        out.backward(grad)
        keep.append(out)

    return forward_backward


def _copies_needed(spec: BenchSpec, case: Case) -> int:
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    bytes_per_call = spec.work(case) if case.metric == "bandwidth" else 0
    if bytes_per_call <= 0:
        return 1
    return max(1, min(MAX_COPIES, -(-L2_MULTIPLE * l2_bytes // int(bytes_per_call))))


def _make_case_inputs(spec: BenchSpec, case: Case) -> tuple[torch.Tensor, ...]:
    inputs = spec.make_inputs(case, "cuda")
    if case.mode == "fwd+bwd":
        inputs = tuple(t.requires_grad_() if t.is_floating_point() else t for t in inputs)
    return inputs


def peak_mib(call: Callable[[], object]) -> float:
    """Peak CUDA memory (MiB) that one call allocates beyond what is live before it:
    outputs, saved activations, gradients and workspaces, as the caching allocator sees them."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:200]


def output_grad(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The gradient a fwd+bwd case feeds to ``backward``: random for a tensor output,
    and 1 for a scalar one, since a scalar output is a loss and ``loss.backward()``
    passes 1 (a kernel may exploit that, on the device, without a host sync)."""
    if shape == ():
        return torch.ones((), dtype=dtype, device="cuda")
    return random_tensor(shape, dtype, device="cuda")


def run_case(
    spec: BenchSpec, case: Case, ops: dict[str, Callable], ceilings: Ceilings
) -> tuple[list[Row], dict[str, str]]:
    torch._dynamo.reset()  # each case compiles afresh, never hitting the recompile limit
    copies = [_make_case_inputs(spec, case) for _ in range(_copies_needed(spec, case))]
    grad = None
    if case.mode == "fwd+bwd":
        grad = output_grad(tuple(spec.reference(*copies[0]).shape), case.dtype)
    differentiable = [t for inputs in copies for t in inputs if t.requires_grad]

    def clear_grads() -> None:
        for t in differentiable:
            t.grad = None

    # Compute-bound calls drive the GPU into its power cap, where the clock switches between states
    # during a run: their providers' replays are interleaved so that all see the same states.
    interleaved = case.metric == "compute"
    captured: dict[str, tuple[torch.cuda.CUDAGraph, float, float]] = {}
    work = spec.work(case)

    def make_row(name: str, timing: tuple[float, float, float], error: float, peak: float, graph_safe: bool) -> Row:
        median, p20, p80 = timing
        rate = work / median / (1e6 if case.metric == "bandwidth" else 1e9)
        return Row(
            sweep=case.sweep,
            x=case.x,
            params=dict(case.params),
            dtype=case.dtype_name,
            mode=case.mode,
            provider=name,
            ms=median,
            ms_p20=p20,
            ms_p80=p80,
            work=work,
            rate=rate,
            fraction_of_ceiling=rate / ceilings.ceiling_of(case.metric),
            max_rel_error=error,
            metric=case.metric,
            peak_mib=peak,
            host_timed=not graph_safe,
            label=case.label,
        )

    rows, failures = [], {}
    for name, op in ops.items():
        if case.providers is not None and name not in case.providers:
            continue
        try:
            error = _verify(op, spec.reference, copies[0], grad, case.dtype)
        except WrongResult as wrong:
            if name == "academy":
                raise WrongResult(f"our kernel is wrong on {case}: {wrong}") from None
            failures[name] = f"wrong result on {dict(case.params)} {case.dtype_name} {case.mode}: {wrong}"
            continue
        except (TypeError, ValueError, NotImplementedError, torch.cuda.OutOfMemoryError) as refused:
            # e.g. a variant limited to narrower rows, or a peer that needs more memory than the GPU has
            if name == OURS:
                raise
            failures[name] = f"does not take {dict(case.params)} {case.dtype_name} {case.mode}: {_first_line(refused)}"
            continue
        except Exception as err:  # a peer library failing on an odd shape (a RuntimeError from its kernels)
            if name == OURS:
                raise
            failures[name] = f"failed on {dict(case.params)} {case.dtype_name} {case.mode}: {_first_line(err)}"
            continue
        clear_grads()
        peak = peak_mib(_thunk(op, copies[0], grad, []))
        clear_grads()
        kept: list[torch.Tensor] = []
        thunks = [_thunk(op, inputs, grad, kept) for inputs in copies]
        graph_safe = getattr(op, "graph_safe", True)
        try:
            if graph_safe and interleaved:
                captured[name] = (capture_graph(thunks, kept.clear, clear_grads), error, peak)
            else:
                timer = time_graph_ms if graph_safe else time_host_ms
                rows.append(make_row(name, timer(thunks, kept.clear, clear_grads), error, peak, graph_safe))
        except Exception as err:  # e.g. a peer that syncs with the host, illegal inside graph capture
            if name == OURS:
                raise
            failures[name] = (
                f"failed while timed on {dict(case.params)} {case.dtype_name} {case.mode}: {_first_line(err)}"
            )
            kept.clear()
            clear_grads()
            torch.cuda.synchronize()
        clear_grads()
    if captured:
        timings = time_graphs_ms({name: (graph, len(copies)) for name, (graph, _, _) in captured.items()})
        rows += [make_row(name, timings[name], error, peak, True) for name, (_, error, peak) in captured.items()]
        rows.sort(key=lambda row: list(ops).index(row.provider))
        captured.clear()  # frees the graphs' memory pools before the next case
    del copies, grad
    differentiable.clear()  # the closure above still refers to the list: empty it to free the tensors
    torch.cuda.empty_cache()
    return rows, failures


def run(
    slug: str,
    *,
    quick: bool = False,
    progress: bool = True,
    sweeps: Sequence[str] | None = None,
    skip: Collection[str] = (),
    on_case_done: Callable[[list[str], Results], None] | None = None,
) -> Results:
    """Measure every case of a chapter's spec (``sweeps``: only those sweeps'; none of the cases
    whose `Case.key` is in ``skip``); return the results (not yet saved). Each time a case ends,
    ``on_case_done(cases_ended, results_so_far)`` may save what a stopped run would lose: a case
    is measured whole in one call (all its providers, so its ratios compare one process's timings)."""
    from tqdm.auto import tqdm

    spec = load_spec(slug)
    # An unknown sweep name fails before any GPU work.
    cases = [case for case in spec.cases(quick=quick, sweeps=sweeps) if case.key not in skip]
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
    run_provenance = provenance(slug)
    rows: list[Row] = []
    cases_ended: list[str] = []

    def results() -> Results:
        return Results(
            slug=slug,
            metric=spec.metric,
            provenance=run_provenance,
            ceilings=ceilings,
            rows=list(rows),
            skipped=dict(skipped),
            timing=TIMING,
        )

    for case in tqdm(cases, desc=slug, unit="case", disable=not progress):
        try:
            case_rows, failures = run_case(spec, case, ops, ceilings)
        except torch.cuda.OutOfMemoryError as err:  # a zoo shape too large for this GPU: skip it, say so
            case_rows, failures = [], {case.key: f"out of GPU memory: {_first_line(err)}"}
        if not case_rows:
            gc.collect()  # the failed case's tensors, held by the exception's frames until now
            torch.cuda.empty_cache()
        rows += case_rows
        skipped.update(failures)
        cases_ended.append(case.key)
        if on_case_done is not None:
            on_case_done(list(cases_ended), results())
    return results()
