"""A whole benchmark run in progress, saved after every case, so a run stopped part-way resumes.

A chapter's benchmark can take longer than one sitting at a GPU (the attention
chapter: about a quarter of an hour), and one sweep can too (a grouped GEMM
sweep of eight cases took more than ten minutes). ``academy bench SLUG`` writes
what it has measured so far to ``examples/<slug>/results/partial/<gpu>.json``
each time a case (a shape, a dtype and a mode, with all its providers) ends, and
removes the file once the results file is written. A later
``academy bench SLUG --resume`` on the same GPU, with the same kernel code,
measures only the cases the file does not hold and puts every row where an
uninterrupted run would (`academy.bench.results.merge_cases`). The finished file
keeps the first run's provenance and ceilings and records each later run's, with
the sweeps and cases it measured; every row stays divided by the ceiling measured
in its own run.

The site reads only the results directory's own ``*.json`` files, never this
folder, so a partial run is never published.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from academy.bench.results import Results, gpu_key

PARTIAL_DIR = "partial"


@dataclass
class Partial:
    results: Results
    """The rows and skipped entries of the cases measured so far, with the runs' provenance and ceilings."""
    cases_done: list[str]
    """The keys (`academy.bench.spec.Case.key`) of the cases that ended, in the order they ended:
    a case without rows (every provider failed, or the GPU could not hold it) counts too."""


def path_of(results_dir: Path, gpu: str) -> Path:
    return Path(results_dir) / PARTIAL_DIR / f"{gpu_key(gpu)}.json"


def save(partial: Partial, results_dir: Path) -> Path:
    path = path_of(results_dir, partial.results.provenance.gpu)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"cases_done": partial.cases_done, "results": json.loads(partial.results.to_json())}
    # Written whole, then renamed: a run killed mid-write leaves the previous case's file intact.
    incoming = path.with_suffix(".tmp")
    incoming.write_text(json.dumps(document, indent=1))
    incoming.replace(path)
    return path


def load(results_dir: Path, gpu: str, run_cases: Mapping[str, str]) -> Partial | None:
    """The saved progress of a run of the cases ``run_cases`` (each case key mapped to its sweep).

    A file saved after every sweep, as before progress was saved by case (it lists ``sweeps_done``),
    counts every case of those sweeps as done. Progress that holds cases ``run_cases`` lacks (another
    ``--quick`` setting, or cases since removed from the spec) is refused: its rows have no place."""
    path = path_of(results_dir, gpu)
    if not path.exists():
        return None
    document = json.loads(path.read_text())
    if "sweeps_done" in document:
        sweeps_done = set(document["sweeps_done"])
        cases_done = [key for key, sweep in run_cases.items() if sweep in sweeps_done]
    else:
        cases_done = list(document["cases_done"])
    foreign = [key for key in cases_done if key not in run_cases]
    if foreign:
        raise ValueError(
            f"{path} holds {len(foreign)} cases this run does not have (e.g. {foreign[0]!r}): it was saved "
            "with another --quick setting or an older spec; delete it, or run without --resume, to start over"
        )
    return Partial(Results.from_dict(document["results"]), cases_done)


def discard(results_dir: Path, gpu: str) -> None:
    path = path_of(results_dir, gpu)
    path.unlink(missing_ok=True)
    if path.parent.is_dir() and not any(path.parent.iterdir()):
        path.parent.rmdir()
