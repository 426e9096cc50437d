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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

OURS = "academy"
"""The provider name of a chapter's final op."""


def is_ours(provider: str) -> bool:
    """Our op, or one of our own stages/ablations (``"academy:<variant>"``): never a peer."""
    return provider == OURS or provider.startswith(OURS + ":")


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

    @property
    def shape_label(self) -> str:
        return "×".join(str(v) for v in self.params.values())


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

    @property
    def unit(self) -> str:
        return self.unit_of(self.metric)

    @property
    def ceiling(self) -> float:
        return self.ceiling_of(self.metric)

    @staticmethod
    def unit_of(metric: str) -> str:
        return "GB/s" if metric == "bandwidth" else "TFLOP/s"

    def ceiling_of(self, metric: str) -> float:
        return self.ceilings.ceiling_of(metric)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=False) + "\n"

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
        )


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
