"""A whole benchmark run in progress, saved after every sweep, so a run stopped part-way resumes.

A chapter's benchmark can take longer than one sitting at a GPU (the attention
chapter: about a quarter of an hour). ``academy bench SLUG`` writes what it has
measured so far to ``examples/<slug>/results/partial/<gpu>.json`` each time a
sweep ends, and removes the file once the results file is written. A later
``academy bench SLUG --resume`` on the same GPU, with the same kernel code,
measures only the sweeps the file does not hold; the finished file keeps the
first run's provenance and ceilings, and records the later run's for its sweeps,
as a ``--sweep`` merge does (`academy.bench.results.merge_sweeps`).

The site reads only the results directory's own ``*.json`` files, never this
folder, so a partial run is never published.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from academy.bench.results import Results, gpu_key

PARTIAL_DIR = "partial"


@dataclass
class Partial:
    results: Results
    """The rows of the sweeps measured so far, with the run's provenance and ceilings."""
    sweeps_done: list[str]
    """The sweeps that ended, in spec order: a sweep without rows (every provider failed) counts too."""


def path_of(results_dir: Path, gpu: str) -> Path:
    return Path(results_dir) / PARTIAL_DIR / f"{gpu_key(gpu)}.json"


def save(partial: Partial, results_dir: Path) -> Path:
    path = path_of(results_dir, partial.results.provenance.gpu)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"sweeps_done": partial.sweeps_done, "results": json.loads(partial.results.to_json())}
    # Written whole, then renamed: a run killed mid-write leaves the previous sweep's file intact.
    incoming = path.with_suffix(".tmp")
    incoming.write_text(json.dumps(document, indent=1))
    incoming.replace(path)
    return path


def load(results_dir: Path, gpu: str) -> Partial | None:
    path = path_of(results_dir, gpu)
    if not path.exists():
        return None
    document = json.loads(path.read_text())
    return Partial(Results.from_dict(document["results"]), list(document["sweeps_done"]))


def discard(results_dir: Path, gpu: str) -> None:
    path = path_of(results_dir, gpu)
    path.unlink(missing_ok=True)
    if path.parent.is_dir() and not any(path.parent.iterdir()):
        path.parent.rmdir()
