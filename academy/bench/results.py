"""The results file: what one benchmark run measured, and on what.

One JSON file per chapter per GPU, ``examples/<slug>/results/<gpu>.json``.
The site renders tables, plots and every quoted number from these files only,
so a file carries everything a reader needs to trust (or distrust) a figure:
the machine, the software versions, the commit and the hash of the kernel code
it measured, the ceilings measured in the same run, and one row per
(case, provider).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

OURS = "academy"
"""The provider name of a chapter's final op."""


def is_ours(provider: str) -> bool:
    """Our op, or one of our own stages/ablations (``"academy:<variant>"``): never a peer."""
    return provider == OURS or provider.startswith(OURS + ":")


def case_key(sweep: str, params: Mapping[str, int], dtype: str, mode: str) -> str:
    """The name of one case (a shape, a dtype and a mode of a sweep), e.g.
    ``"M=8192: M=8192, N=1024 bfloat16 fwd"``: what a run's saved progress lists as done, and the
    ``skipped`` entry of a whole case the GPU could not hold."""
    return f"{sweep}: {', '.join(f'{k}={v}' for k, v in params.items())} {dtype} {mode}"


@dataclass(frozen=True)
class Provenance:
    gpu: str
    sm_count: int
    driver: str
    cuda: str
    torch: str
    triton: str
    python: str
    date: str  # ISO 8601, UTC
    git_commit: str
    git_dirty: bool
    kernel_hash: str  # academy.chapters.code_hash of examples/<slug>/kernel.py
    peers: dict[str, str] | None = None
    """Versions of the peer libraries installed for the run (``{"liger-kernel": "0.8.5"}``); ``None`` in
    files written before the field existed."""


@dataclass(frozen=True)
class Ceilings:
    """Hardware ceilings measured in the same run as the rows."""

    copy_gbps: float  # large device-to-device copy, bytes read + bytes written
    matmul_tflops: float  # large bf16 matmul through cuBLAS
    copy_bytes: int
    matmul_size: int

    def ceiling_of(self, metric: str) -> float:
        return self.copy_gbps if metric == "bandwidth" else self.matmul_tflops


@dataclass(frozen=True)
class Row:
    sweep: str  # which family of cases this belongs to, e.g. "M=8192"
    x: str  # the parameter that varies along the sweep, e.g. "N"
    params: dict[str, int]  # the full shape, e.g. {"M": 8192, "N": 4096}
    dtype: str  # "bfloat16", "float16", "float32"
    mode: str  # "fwd" or "fwd+bwd"
    provider: str  # "academy", "eager", "compile", "liger", "torch", ...
    ms: float  # median
    ms_p20: float
    ms_p80: float
    work: float  # bytes (bandwidth metric) or FLOPs (compute metric) of one call
    rate: float  # GB/s or TFLOP/s
    fraction_of_ceiling: float  # rate / ceiling, 0..1+
    max_rel_error: float  # checked against the reference before timing
    metric: str = ""  # "bandwidth" or "compute"; empty in files that predate per-sweep metrics
    peak_mib: float | None = None  # peak CUDA memory one call allocates beyond its inputs
    host_timed: bool = False  # timed by events around host launches (the op syncs with the host)
    label: str = ""  # what the shape stands for (the models that have it); empty for most sweeps

    @property
    def shape_label(self) -> str:
        return "×".join(str(v) for v in self.params.values())

    @property
    def case_key(self) -> str:
        return case_key(self.sweep, self.params, self.dtype, self.mode)


@dataclass(frozen=True)
class MergedRun:
    """A later run whose rows replaced those of some sweeps (``academy bench SLUG --sweep NAME``) or
    finished a stopped run (``--resume``): its own provenance, and the ceilings its rows' fractions
    were taken against."""

    sweeps: list[str]
    """The sweeps whose every case it measured."""
    provenance: Provenance
    ceilings: Ceilings
    cases: dict[str, list[str]] = field(default_factory=dict)
    """For each sweep it measured only part of (a resumed run picks a sweep up where the stopped run
    left it, and may itself stop inside one): the keys (`case_key`) of the cases it measured."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MergedRun:
        return cls(
            list(data["sweeps"]),
            Provenance(**data["provenance"]),
            Ceilings(**data["ceilings"]),
            {sweep: list(keys) for sweep, keys in data.get("cases", {}).items()},
        )


@dataclass
class Results:
    slug: str
    metric: str  # "bandwidth" (GB/s vs copy ceiling) or "compute" (TFLOP/s vs matmul)
    provenance: Provenance
    ceilings: Ceilings
    rows: list[Row]
    skipped: dict[str, str] = field(default_factory=dict)  # provider -> why it did not run
    timing: str = ""  # how each row's time was taken, in words, for the page
    schema: int = SCHEMA_VERSION
    merged: list[MergedRun] = field(default_factory=list)
    """Runs merged in later, each for some sweeps (same kernel code, same GPU); empty for one whole run."""

    @property
    def unit(self) -> str:
        return self.unit_of(self.metric)

    @property
    def ceiling(self) -> float:
        return self.ceiling_of(self.metric)

    @staticmethod
    def unit_of(metric: str) -> str:
        return "GB/s" if metric == "bandwidth" else "TFLOP/s"

    def ceiling_of(self, metric: str, sweep: str | None = None) -> float:
        """The ceiling the rows of ``sweep`` were measured against (that of a merged run, for its sweeps)."""
        return self.ceilings_of(sweep).ceiling_of(metric)

    def ceilings_of(self, sweep: str | None) -> Ceilings:
        """The ceilings of the run that measured ``sweep``. A sweep that a resumed run finished was
        measured by several runs, and each row's ``fraction_of_ceiling`` is against the ceilings of
        the run that measured that row (`MergedRun.cases` says which); the ceilings given for the
        sweep are then those of the run that measured its first row."""
        for run in self.merged:
            if sweep in run.sweeps:
                return run.ceilings
        first = next((row.case_key for row in self.rows if row.sweep == sweep), None)
        for run in self.merged:
            if first in run.cases.get(sweep, ()):
                return run.ceilings
        return self.ceilings

    def to_json(self) -> str:
        data = asdict(self)
        for row in data["rows"]:
            if not row["label"]:
                del row["label"]  # most rows have none: keep the files as they were
        if not data["merged"]:
            del data["merged"]
        for run in data.get("merged", []):
            if not run["cases"]:
                del run["cases"]  # only a resumed run has any
        return json.dumps(data, indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Results:
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"results schema {data.get('schema')!r}, expected {SCHEMA_VERSION}")
        return cls(
            slug=data["slug"],
            metric=data["metric"],
            provenance=Provenance(**data["provenance"]),
            ceilings=Ceilings(**data["ceilings"]),
            rows=[Row(**{**row, "metric": row.get("metric") or data["metric"]}) for row in data["rows"]],
            skipped=dict(data.get("skipped", {})),
            timing=data.get("timing", ""),
            merged=[MergedRun.from_dict(run) for run in data.get("merged", [])],
        )


def check_mergeable(existing: Results, kernel_hash: str, gpu: str) -> None:
    """Refuse to merge new rows into ``existing`` unless they measure the same kernel code on the same GPU."""
    if existing.provenance.kernel_hash != kernel_hash:
        raise ValueError(
            f"{existing.slug}: the results file was measured on kernel code {existing.provenance.kernel_hash}, "
            f"and the code is now {kernel_hash}: merging would mix two versions of the kernel in one file; "
            "run the whole benchmark (without --sweep)"
        )
    if existing.provenance.gpu != gpu:
        raise ValueError(
            f"{existing.slug}: the results file was measured on {existing.provenance.gpu}, not on this {gpu}; "
            "run the whole benchmark (without --sweep)"
        )


def merge_sweeps(existing: Results, measured: Results, sweeps: list[str]) -> Results:
    """``existing`` with the rows of ``sweeps`` replaced by ``measured``'s rows (which hold those sweeps
    only): replaced sweeps keep their place, new ones follow. The file keeps its provenance and
    ceilings; ``measured``'s are recorded in ``merged`` for its sweeps."""
    check_mergeable(existing, measured.provenance.kernel_hash, measured.provenance.gpu)
    if measured.slug != existing.slug:
        raise ValueError(f"cannot merge {measured.slug} results into {existing.slug}'s")
    stray = {row.sweep for row in measured.rows} - set(sweeps)
    if stray:
        raise ValueError(f"the measured rows hold sweeps that were not named: {sorted(stray)}")
    new_rows = {sweep: [row for row in measured.rows if row.sweep == sweep] for sweep in sweeps}
    rows: list[Row] = []
    for row in existing.rows:
        if row.sweep in new_rows:
            rows += new_rows.pop(row.sweep)  # the first old row of a sweep: its new rows go here
        elif row.sweep not in sweeps:
            rows.append(row)
    for sweep_rows in new_rows.values():
        rows += sweep_rows
    earlier = [
        MergedRun(
            [s for s in run.sweeps if s not in sweeps],
            run.provenance,
            run.ceilings,
            {s: keys for s, keys in run.cases.items() if s not in sweeps},
        )
        for run in existing.merged
    ]
    merged = [run for run in earlier if run.sweeps or run.cases]
    return _merged(existing, measured, rows, [*merged, MergedRun(list(sweeps), measured.provenance, measured.ceilings)])


def _merged(existing: Results, measured: Results, rows: list, merged: list[MergedRun]) -> Results:
    """``existing`` with ``rows`` and the runs ``merged``: its provenance and ceilings kept, ``measured``'s
    skipped entries added."""
    return Results(
        slug=existing.slug,
        metric=existing.metric,
        provenance=existing.provenance,
        ceilings=existing.ceilings,
        rows=rows,
        skipped={**existing.skipped, **measured.skipped},
        timing=existing.timing or measured.timing,
        merged=merged,
    )


def merge_cases(existing: Results, measured: Results, cases: list[str], run_cases: Mapping[str, str]) -> Results:
    """A stopped run's progress, ``existing``, with ``measured``'s rows of ``cases`` (the case keys
    the resumed run measured) added; ``run_cases`` maps every case key of the whole run to its sweep,
    in run order, and the rows come out in that order, as an uninterrupted run gives them.

    The file keeps its provenance and ceilings; ``measured``'s are recorded in ``merged``, with the
    sweeps it measured whole and the cases of the others it measured. Each row keeps the
    ``fraction_of_ceiling`` its own run gave it: it is divided by a ceiling measured on the machine,
    in the process, that timed it, never by another run's."""
    check_mergeable(existing, measured.provenance.kernel_hash, measured.provenance.gpu)
    if measured.slug != existing.slug:
        raise ValueError(f"cannot merge {measured.slug} results into {existing.slug}'s")
    stray = {row.case_key for row in measured.rows} - set(cases)
    if stray:
        raise ValueError(f"the measured rows hold cases that were not named: {sorted(stray)}")
    position = {key: i for i, key in enumerate(run_cases)}
    rows = existing.rows + measured.rows
    outside = {row.case_key for row in rows} - position.keys()
    if outside:
        raise ValueError(f"rows of cases the run does not have: {sorted(outside)}")
    rows.sort(key=lambda row: position[row.case_key])  # stable: a case's providers keep their order
    measured_here = set(cases)
    whole_sweeps = [
        sweep
        for sweep in dict.fromkeys(run_cases.values())
        if all(key in measured_here for key, its_sweep in run_cases.items() if its_sweep == sweep)
    ]
    part_sweeps: dict[str, list[str]] = {}
    for key in cases:
        if run_cases[key] not in whole_sweeps:
            part_sweeps.setdefault(run_cases[key], []).append(key)
    run = MergedRun(whole_sweeps, measured.provenance, measured.ceilings, part_sweeps)
    return _merged(existing, measured, rows, [*existing.merged, run])


def gpu_key(gpu_name: str) -> str:
    """File stem for a GPU: 'NVIDIA H100 80GB HBM3' -> 'h100'."""
    match = re.search(r"\b([A-Z]+\d{2,4}[A-Z]?)\b", gpu_name.upper().replace("NVIDIA", ""))
    key = match.group(1) if match else gpu_name
    return re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")


def save(results: Results, results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{gpu_key(results.provenance.gpu)}.json"
    path.write_text(results.to_json())
    return path


def load(path: Path) -> Results:
    return Results.from_dict(json.loads(Path(path).read_text()))
