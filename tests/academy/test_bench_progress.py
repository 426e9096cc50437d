"""A whole benchmark run saves its progress after every sweep, and ``--resume`` finishes it.

The GPU and the measurements are planted (a fake device, a runner that makes
rows): what is tested is which sweeps each run measures and what the finished
file holds.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from academy.bench import progress
from academy.bench.results import load
from academy.bench.runner import load_spec
from academy.chapters import chapter
from academy.cli import main

import pytest
import torch

from tests.results_fixtures import make_results, make_row

SLUG = "rms_norm"
GPU = "NVIDIA H100 80GB HBM3"


class Stopped(RuntimeError):
    """The machine went away mid-run."""


@pytest.fixture
def gpu_runs(monkeypatch):
    """A machine that says it has an H100, and a runner whose n-th call measures each sweep
    it is asked for (a row per sweep, dated by the call) and stops after ``stop_after[n]`` sweeps."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _: SimpleNamespace(name=GPU))
    state = SimpleNamespace(calls=[], stop_after={}, kernel_hash=chapter(SLUG).code_hash())

    def run(slug, *, quick=False, progress=True, sweeps=None, skip=(), on_sweep_done=None):
        call = len(state.calls)
        state.calls.append(list(skip))
        todo = [sweep.name for sweep in load_spec(slug).sweeps if sweep.name not in skip]
        rows, ended = [], []
        measured = make_results(rows, kernel_hash=state.kernel_hash)
        measured.slug = slug
        measured.provenance = dataclasses.replace(measured.provenance, date=f"2025-01-0{call + 1}T00:00:00Z")
        for sweep in todo:
            if len(ended) == state.stop_after.get(call, len(todo)):
                raise Stopped("the machine went away")
            rows.append(make_row("academy", 1024, 1.0, sweep=sweep))
            ended.append(sweep)
            if on_sweep_done:
                on_sweep_done(list(ended), dataclasses.replace(measured, rows=list(rows)))
        return dataclasses.replace(measured, rows=rows)

    monkeypatch.setattr("academy.bench.runner.run", run)
    return state


def sweeps_of_spec():
    return [sweep.name for sweep in load_spec(SLUG).sweeps]


def test_a_stopped_run_leaves_its_finished_sweeps_and_no_results_file(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 2}
    assert main(["bench", SLUG, "--out", str(tmp_path)]) == 2
    assert not (tmp_path / SLUG / "h100.json").exists()
    saved = progress.load(tmp_path / SLUG, GPU)
    assert saved.sweeps_done == sweeps_of_spec()[:2]
    assert [row.sweep for row in saved.results.rows] == sweeps_of_spec()[:2]


def test_resume_measures_only_what_is_missing_and_keeps_both_runs_provenance(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 2}
    main(["bench", SLUG, "--out", str(tmp_path)])
    assert main(["bench", SLUG, "--out", str(tmp_path), "--resume"]) == 0
    assert gpu_runs.calls == [[], sweeps_of_spec()[:2]]
    finished = load(tmp_path / SLUG / "h100.json")
    assert [row.sweep for row in finished.rows] == sweeps_of_spec(), "every sweep once, in spec order"
    assert finished.provenance.date.startswith("2025-01-01"), "the first run's provenance heads the file"
    assert [(run.sweeps, run.provenance.date[:10]) for run in finished.merged] == [(sweeps_of_spec()[2:], "2025-01-02")]
    assert progress.load(tmp_path / SLUG, GPU) is None, "the progress file is gone once the results are written"


def test_a_resumed_run_stopped_again_resumes_from_both(tmp_path, gpu_runs):
    assert len(sweeps_of_spec()) >= 3, "the spec needs three sweeps for this test"
    gpu_runs.stop_after = {0: 1, 1: 1}
    main(["bench", SLUG, "--out", str(tmp_path)])
    main(["bench", SLUG, "--out", str(tmp_path), "--resume"])
    assert progress.load(tmp_path / SLUG, GPU).sweeps_done == sweeps_of_spec()[:2]
    assert main(["bench", SLUG, "--out", str(tmp_path), "--resume"]) == 0
    assert gpu_runs.calls[2] == sweeps_of_spec()[:2]
    assert [row.sweep for row in load(tmp_path / SLUG / "h100.json").rows] == sweeps_of_spec()


def test_resume_refuses_progress_of_other_kernel_code(tmp_path, gpu_runs, capsys):
    gpu_runs.kernel_hash = "0000"
    gpu_runs.stop_after = {0: 1}
    main(["bench", SLUG, "--out", str(tmp_path)])
    capsys.readouterr()
    assert main(["bench", SLUG, "--out", str(tmp_path), "--resume"]) == 2
    assert "kernel code" in capsys.readouterr().err
    assert len(gpu_runs.calls) == 1, "refused before any measurement"


def test_without_resume_a_run_starts_over(tmp_path, gpu_runs):
    gpu_runs.stop_after = {0: 2}
    main(["bench", SLUG, "--out", str(tmp_path)])
    assert main(["bench", SLUG, "--out", str(tmp_path)]) == 0
    assert gpu_runs.calls == [[], []]
    assert load(tmp_path / SLUG / "h100.json").merged == []


def test_resume_with_nothing_saved_is_a_whole_run(tmp_path, gpu_runs):
    assert main(["bench", SLUG, "--out", str(tmp_path), "--resume"]) == 0
    assert gpu_runs.calls == [[]]


def test_resume_and_sweep_together_are_refused(tmp_path, gpu_runs, capsys):
    assert main(["bench", SLUG, "--out", str(tmp_path), "--resume", "--sweep", "models"]) == 2
    assert "--resume resumes a whole run" in capsys.readouterr().err and gpu_runs.calls == []


def test_progress_is_never_read_as_a_results_file(tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    progress.save(progress.Partial(make_results([make_row("academy", 1024, 1.0)]), ["M=8192"]), results_dir)
    monkeypatch.setattr(type(chapter(SLUG)), "results_dir", property(lambda self: results_dir))
    assert chapter(SLUG).results_files() == []
