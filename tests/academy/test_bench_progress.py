"""A whole benchmark run saves its progress after every case, and ``--resume`` finishes it.

The GPU and the measurements are planted (a fake device, a runner that makes
rows): what is tested is which cases each run measures and what the finished
file holds. Every number is a planted fixture value; none is a measurement.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from academy.bench import progress, runner
from academy.bench.results import load
from academy.bench.runner import load_spec
from academy.chapters import chapter
from academy.cli import main

import pytest
import torch

from tests.results_fixtures import make_results, make_row

SLUG = "rms_norm"
GPU = "NVIDIA H100 80GB HBM3"
RUN_CASES = {case.key: case.sweep for case in load_spec(SLUG).cases()}
"""Every case of a whole run, in run order, mapped to its sweep."""
CASES = list(RUN_CASES)
SWEEPS = [sweep.name for sweep in load_spec(SLUG).sweeps]
OUT_OF_MEMORY = CASES[2]
"""The planted case the GPU cannot hold: it ends with a ``skipped`` entry and no rows."""


def cases_of(sweep: str) -> list[str]:
    return [key for key in CASES if RUN_CASES[key] == sweep]


def rows_of(cases: list[str]) -> list[str]:
    """The case of each row that an unstopped run of ``cases`` gives: two providers a case."""
    return [key for key in cases for _ in range(2) if key != OUT_OF_MEMORY]


def ceiling_of_call(call: int) -> float:
    """Each run measures its own copy ceiling: a different one per call, to tell them apart."""
    return 3000.0 + 100.0 * call


def bench(out, *flags) -> int:
    return main(["bench", SLUG, "--out", str(out), *flags])


def timings(results) -> list[tuple[str, str, float]]:
    return [(row.case_key, row.provider, row.ms) for row in results.rows]


class Stopped(RuntimeError):
    """The machine went away mid-run."""


@pytest.fixture
def gpu_runs(monkeypatch):
    """A machine that says it has an H100, and a runner whose n-th call measures each case it is
    not told to skip (two providers, timed the same on every call; ``OUT_OF_MEMORY`` skipped whole;
    liger failing on every fwd+bwd case) and stops after ``stop_after[n]`` cases."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _: SimpleNamespace(name=GPU))
    state = SimpleNamespace(calls=[], stop_after={}, kernel_hash=chapter(SLUG).code_hash())

    def run(slug, *, quick=False, progress=True, sweeps=None, skip=(), on_case_done=None):
        call = len(state.calls)
        state.calls.append(list(skip))
        ceiling = ceiling_of_call(call)
        measured = make_results([], kernel_hash=state.kernel_hash)
        measured.slug = slug
        measured.provenance = dataclasses.replace(measured.provenance, date=f"2025-01-0{call + 1}T00:00:00Z")
        measured.ceilings = dataclasses.replace(measured.ceilings, copy_gbps=ceiling)
        todo = [case for case in load_spec(slug).cases(quick=quick, sweeps=sweeps) if case.key not in skip]
        ended = []
        for case in todo:
            if len(ended) == state.stop_after.get(call, len(todo)):
                raise Stopped("the machine went away")
            if case.key == OUT_OF_MEMORY:
                measured.skipped[case.key] = "out of GPU memory"
            else:
                for provider, ms in (("academy", 1.0), ("eager", 2.0)):
                    ms += CASES.index(case.key) / 100
                    n, m = case.params["N"], case.params["M"]
                    row = make_row(provider, n, ms, m=m, mode=case.mode, dtype=case.dtype_name, ceiling=ceiling)
                    measured.rows.append(dataclasses.replace(row, sweep=case.sweep, label=case.label))
            if case.mode == "fwd+bwd":
                measured.skipped["liger"] = f"failed on {case.key}"
            ended.append(case.key)
            if on_case_done:
                on_case_done(list(ended), dataclasses.replace(measured, rows=list(measured.rows)))
        return measured

    monkeypatch.setattr("academy.bench.runner.run", run)
    return state


def test_the_runner_skips_the_finished_cases_and_reports_after_every_case(monkeypatch):
    """The real runner, with the GPU work planted: each case is measured whole, then reported."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runner, "measure_ceilings", lambda: make_results([]).ceilings)
    monkeypatch.setattr(runner, "provenance", lambda slug: make_results([]).provenance)
    spec = load_spec(SLUG)
    planted = dataclasses.replace(spec, providers={name: lambda: torch.add for name in spec.providers})
    monkeypatch.setattr(runner, "load_spec", lambda slug: planted)
    measured = []

    def run_case(spec, case, ops, ceilings):
        measured.append(case.key)
        if case.key == OUT_OF_MEMORY:
            raise torch.cuda.OutOfMemoryError("planted")
        row = make_row("academy", case.params["N"], 1.0, m=case.params["M"], mode=case.mode, dtype=case.dtype_name)
        return [dataclasses.replace(row, sweep=case.sweep)], {}

    monkeypatch.setattr(runner, "run_case", run_case)
    reports = []
    results = runner.run(
        SLUG, progress=False, skip=CASES[:2], on_case_done=lambda ended, so_far: reports.append((ended, so_far))
    )
    assert measured == CASES[2:]
    assert [ended for ended, _ in reports] == [CASES[2:i] for i in range(3, len(CASES) + 1)]
    assert [len(so_far.rows) for _, so_far in reports[:2]] == [0, 1], "the out-of-memory case ends with no rows"
    assert reports[0][1].skipped[OUT_OF_MEMORY].startswith("out of GPU memory")
    assert [row.case_key for row in results.rows] == CASES[3:]


def test_the_planted_spec_has_the_sweeps_these_tests_stop_in():
    assert len(SWEEPS) >= 3 and len(cases_of(SWEEPS[0])) > 5 and len(cases_of(SWEEPS[1])) >= 2
    assert CASES == [key for sweep in SWEEPS for key in cases_of(sweep)], "cases run sweep by sweep"


def test_a_run_stopped_mid_sweep_keeps_its_finished_cases_and_writes_no_results_file(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 5}
    assert bench(tmp_path) == 2
    assert not (tmp_path / SLUG / "h100.json").exists()
    assert not list((tmp_path / SLUG).glob("*.json")), "no results file, whole or partial, outside partial/"
    saved = progress.load(tmp_path / SLUG, GPU, RUN_CASES)
    assert saved.cases_done == CASES[:5]
    assert [row.case_key for row in saved.results.rows] == rows_of(CASES[:5])
    assert saved.results.skipped[OUT_OF_MEMORY] == "out of GPU memory"


def test_resume_starts_at_the_next_case_and_gives_the_rows_of_an_unstopped_run(tmp_path, gpu_runs):
    assert bench(tmp_path / "unstopped") == 0
    gpu_runs.stop_after = {1: 5}
    bench(tmp_path / "stopped")
    assert bench(tmp_path / "stopped", "--resume") == 0
    assert gpu_runs.calls == [[], [], CASES[:5]], "the resumed run skips exactly the five finished cases"
    unstopped = load(tmp_path / "unstopped" / SLUG / "h100.json")
    resumed = load(tmp_path / "stopped" / SLUG / "h100.json")
    assert timings(resumed) == timings(unstopped), "the same rows in the same order"
    assert resumed.skipped == unstopped.skipped and list(resumed.skipped) == list(unstopped.skipped)
    assert progress.load(tmp_path / "stopped" / SLUG, GPU, RUN_CASES) is None, "the progress is gone once written"


def test_resumed_rows_keep_their_own_runs_ceiling_and_the_file_says_which_run_measured_what(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 5}
    bench(tmp_path)
    bench(tmp_path, "--resume")
    finished = load(tmp_path / SLUG / "h100.json")
    for row in finished.rows:
        ceiling = ceiling_of_call(0 if CASES.index(row.case_key) < 5 else 1)
        assert row.fraction_of_ceiling == pytest.approx(row.rate / ceiling), row.case_key
    assert finished.provenance.date.startswith("2025-01-01") and finished.ceilings.copy_gbps == ceiling_of_call(0)
    [later] = finished.merged
    assert later.provenance.date.startswith("2025-01-02") and later.ceilings.copy_gbps == ceiling_of_call(1)
    assert later.sweeps == SWEEPS[1:] and later.cases == {SWEEPS[0]: cases_of(SWEEPS[0])[5:]}
    assert finished.ceiling_of("bandwidth", SWEEPS[0]) == ceiling_of_call(0), "the run of the sweep's first row"
    assert finished.ceiling_of("bandwidth", SWEEPS[1]) == ceiling_of_call(1)


def test_a_later_sweep_merge_takes_over_the_cases_a_resumed_run_measured_of_that_sweep(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 5}
    bench(tmp_path)
    bench(tmp_path, "--resume")
    assert bench(tmp_path, "--sweep", SWEEPS[0]) == 0
    path = tmp_path / SLUG / "h100.json"
    resumed, remeasured = load(path).merged
    assert resumed.sweeps == SWEEPS[1:] and resumed.cases == {}
    assert remeasured.sweeps == [SWEEPS[0]] and load(path).ceiling_of("bandwidth", SWEEPS[0]) == ceiling_of_call(2)
    assert "cases" not in json.loads(path.read_text())["merged"][0], "a run without cases is written as before"


def test_a_resumed_run_stopped_again_resumes_from_both(tmp_path, gpu_runs):
    first_sweep = len(cases_of(SWEEPS[0]))
    gpu_runs.stop_after = {0: 5, 1: first_sweep - 5 + 1}  # the second run stops after one case of the next sweep
    bench(tmp_path)
    bench(tmp_path, "--resume")
    assert progress.load(tmp_path / SLUG, GPU, RUN_CASES).cases_done == CASES[: first_sweep + 1]
    assert bench(tmp_path, "--resume") == 0
    assert gpu_runs.calls[2] == CASES[: first_sweep + 1]
    finished = load(tmp_path / SLUG / "h100.json")
    assert [row.case_key for row in finished.rows] == rows_of(CASES)
    second, third = finished.merged
    assert second.sweeps == [] and second.cases == {SWEEPS[0]: CASES[5:first_sweep], SWEEPS[1]: [CASES[first_sweep]]}
    assert third.sweeps == SWEEPS[2:] and third.cases == {SWEEPS[1]: cases_of(SWEEPS[1])[1:]}
    assert finished.ceiling_of("bandwidth", SWEEPS[1]) == ceiling_of_call(1), "the second run began that sweep"


def test_a_run_stopped_while_writing_its_results_keeps_its_progress_and_resumes_without_measuring(
    tmp_path, gpu_runs, monkeypatch
):
    def stopped(*_):
        raise Stopped("the machine went away")

    with monkeypatch.context() as writing:
        writing.setattr("academy.bench.results.save", stopped)
        assert bench(tmp_path) == 2
    assert progress.load(tmp_path / SLUG, GPU, RUN_CASES).cases_done == CASES
    assert bench(tmp_path, "--resume") == 0
    assert len(gpu_runs.calls) == 1, "nothing left to measure"
    finished = load(tmp_path / SLUG / "h100.json")
    assert [row.case_key for row in finished.rows] == rows_of(CASES) and finished.merged == []
    assert not progress.path_of(tmp_path / SLUG, GPU).exists()


def test_a_stopped_quick_run_resumed_whole_puts_every_row_in_its_place(tmp_path, gpu_runs):
    quick = [case.key for case in load_spec(SLUG).cases(quick=True)]
    first_of_second_sweep = next(i for i, key in enumerate(quick) if RUN_CASES[key] == SWEEPS[1])
    gpu_runs.stop_after = {0: first_of_second_sweep + 1}
    bench(tmp_path, "--quick")
    assert bench(tmp_path, "--resume") == 0
    assert gpu_runs.calls[1] == quick[: first_of_second_sweep + 1]
    assert [row.case_key for row in load(tmp_path / SLUG / "h100.json").rows] == rows_of(CASES)


def test_resume_reads_progress_saved_by_sweep(tmp_path, gpu_runs):
    """A partial file written before progress was saved by case lists the sweeps done."""
    gpu_runs.stop_after = {0: len(cases_of(SWEEPS[0]))}
    bench(tmp_path)
    path = progress.path_of(tmp_path / SLUG, GPU)
    document = json.loads(path.read_text())
    path.write_text(json.dumps({"sweeps_done": SWEEPS[:1], "results": document["results"]}))
    assert bench(tmp_path, "--resume") == 0
    assert gpu_runs.calls[1] == cases_of(SWEEPS[0])
    assert [row.case_key for row in load(tmp_path / SLUG / "h100.json").rows] == rows_of(CASES)


def test_resume_refuses_progress_of_other_kernel_code(tmp_path, gpu_runs, capsys):
    gpu_runs.kernel_hash = "0000"
    gpu_runs.stop_after = {0: 1}
    bench(tmp_path)
    capsys.readouterr()
    assert bench(tmp_path, "--resume") == 2
    assert "kernel code" in capsys.readouterr().err
    assert len(gpu_runs.calls) == 1, "refused before any measurement"
    assert not (tmp_path / SLUG / "h100.json").exists()


def test_resume_refuses_progress_with_cases_the_run_lacks(tmp_path, gpu_runs, capsys):
    gpu_runs.stop_after = {0: len(CASES) - 1}
    bench(tmp_path)
    capsys.readouterr()
    assert bench(tmp_path, "--resume", "--quick") == 2, "a whole run's cases are not all a --quick run's"
    assert "delete it" in capsys.readouterr().err and len(gpu_runs.calls) == 1


def test_without_resume_a_run_starts_over(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 5}
    bench(tmp_path)
    assert bench(tmp_path) == 0
    assert gpu_runs.calls == [[], []]
    assert load(tmp_path / SLUG / "h100.json").merged == []


def test_resume_with_nothing_saved_is_a_whole_run(tmp_path, gpu_runs):
    assert bench(tmp_path, "--resume") == 0
    assert gpu_runs.calls == [[]]


def test_resume_and_sweep_together_are_refused(tmp_path, gpu_runs, capsys):
    assert bench(tmp_path, "--resume", "--sweep", "models") == 2
    assert "--resume resumes a whole run" in capsys.readouterr().err and gpu_runs.calls == []


def test_progress_is_never_read_as_a_results_file(tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    progress.save(progress.Partial(make_results([make_row("academy", 1024, 1.0)]), CASES[:1]), results_dir)
    monkeypatch.setattr(type(chapter(SLUG)), "results_dir", property(lambda self: results_dir))
    assert chapter(SLUG).results_files() == []
