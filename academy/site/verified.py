"""Verified-with records: which torch / Triton a chapter's tests passed with, where.

A record is written by the pytest plugin `academy.site.pytest_verified` (active
when ``ACADEMY_RECORD_VERIFIED=1``) after a run in which *every* test of a
chapter ran and none failed, into ``examples/<slug>/verified/<key>.json``:
``cpu.json`` for the Triton interpreter, ``h100.json`` (the
[`academy.bench.results.gpu_key`][] of the device) on a GPU. The pages show
the records as a badge right under the chapter's title
([`academy.site.pages.insert_badge`][] puts it there), so no version is ever typed by hand:

    Verified: CPU interpreter — torch 2.13.0, triton 3.9.0 (2026-11-22) ·
    H100 (sm_90) — torch 2.11.0, triton 3.6.0 (2026-11-22) · fast path needs sm_90 (TMA)

A record whose ``code_hash`` differs from the chapter's current
[`academy.chapters.Chapter.code_hash`][] is shown as stale.

**Which tests belong to a chapter**: the files ``test_*.py`` under
``tests/<slug>/``, the folder ``academy check SLUG`` runs; nothing else.

**The minimum architecture of the fast path** is read from the chapter's code,
never typed on the page: a module-level constant in any of the chapter's code
files (``Chapter.code_files()``, i.e. ``kernel.py`` and what the bench imports)::

    FAST_PATH_REQUIRES = (9, 0)          # compute capability the fast path needs
    FAST_PATH_REASON = "TMA descriptors"  # optional: why, in a few words

The kernel should use the same constant to gate its fast path
(``torch.cuda.get_device_capability() >= FAST_PATH_REQUIRES``). Without it the
badge says the chapter runs on any CUDA GPU Triton supports.
"""

from __future__ import annotations

import ast
import json
import platform as _platform
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from academy.chapters import Chapter

CPU_KEY = "cpu"
CPU_PLATFORM = "cpu-interpreter"
SCHEMA = 1


@dataclass(frozen=True)
class Record:
    slug: str
    key: str  # "cpu", "h100", ...
    platform: str  # "cpu-interpreter" or the GPU's name
    capability: str | None  # "sm_90" on a GPU, None on the CPU
    torch: str
    triton: str
    python: str
    date: str  # ISO 8601 UTC
    code_hash: str
    passed: int
    skipped: int
    test_files: list[str] = field(default_factory=list)
    schema: int = SCHEMA

    @property
    def label(self) -> str:
        if self.key == CPU_KEY:
            return "CPU interpreter"
        return f"{self.key.upper()} ({self.capability})" if self.capability else self.key.upper()


# --------------------------------------------------------------------------- files


def verified_dir(slug: str) -> Path:
    return Chapter(slug).package / "verified"


def save(record: Record) -> Path:
    folder = verified_dir(record.slug)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record.key}.json"
    path.write_text(json.dumps(asdict(record), indent=1) + "\n")
    return path


def load_records(slug: str) -> list[Record]:
    """Every record of a chapter, CPU first, then GPUs by key."""
    records = []
    for path in sorted(verified_dir(slug).glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise ValueError(f"{path}: verified-record schema {data.get('schema')!r}, expected {SCHEMA}")
        records.append(Record(**data))
    return sorted(records, key=lambda r: (r.key != CPU_KEY, r.key))


# --------------------------------------------------------------------------- a chapter's tests


def test_files_of(slug: str) -> list[Path]:
    """A chapter's tests: every ``test_*.py`` under ``tests/<slug>/``, as ``academy check`` runs them."""
    return sorted(Chapter(slug).tests_dir.rglob("test_*.py"))


# --------------------------------------------------------------------------- platform


def current_platform() -> tuple[str, str, str | None]:
    """(key, platform, capability) of this process: the GPU when CUDA is used, else the interpreter."""
    from academy import INTERPRETED

    import torch

    if INTERPRETED or not torch.cuda.is_available():
        return CPU_KEY, CPU_PLATFORM, None
    from academy.bench.results import gpu_key

    name = torch.cuda.get_device_name()
    major, minor = torch.cuda.get_device_capability()
    return gpu_key(name), name, f"sm_{major}{minor}"


def make_record(slug: str, passed: int, skipped: int, test_files: list[str]) -> Record:
    import torch
    import triton

    key, where, capability = current_platform()
    return Record(
        slug=slug,
        key=key,
        platform=where,
        capability=capability,
        torch=torch.__version__.split("+")[0],
        triton=triton.__version__,
        python=_platform.python_version(),
        date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        code_hash=Chapter(slug).code_hash(),
        passed=passed,
        skipped=skipped,
        test_files=sorted(test_files),
    )


# --------------------------------------------------------------------------- fast path


def fast_path_requirement(slug: str) -> tuple[tuple[int, int], str] | None:
    """``((major, minor), reason)`` from ``FAST_PATH_REQUIRES`` / ``FAST_PATH_REASON`` in the chapter's code."""
    needs, reason = None, ""
    ch = Chapter(slug)
    files = ch.code_files() if ch.kernel_file.is_file() else []
    for path in files:
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                targets = [node.target.id]
            if not targets:
                continue
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if "FAST_PATH_REQUIRES" in targets and needs is None:
                if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value)):
                    raise ValueError(f"{path}: FAST_PATH_REQUIRES must be a (major, minor) tuple, got {value!r}")
                needs = value
            if "FAST_PATH_REASON" in targets and not reason:
                reason = str(value)
    return (needs, reason) if needs else None


# --------------------------------------------------------------------------- badge


def _date(iso: str) -> str:
    return iso[:10]


def badge(slug: str) -> str:
    """One Markdown paragraph: every record, stale ones marked, and the fast path's minimum GPU."""
    current = Chapter(slug).code_hash()
    records = load_records(slug)
    parts = []
    for r in records:
        text = f"{r.label} — torch {r.torch}, triton {r.triton} ({_date(r.date)})"
        if r.code_hash != current:
            text += " <strong>stale: the code changed since</strong>"
        parts.append(text)
    if not records:
        parts.append("not yet verified")
    elif all(r.key == CPU_KEY for r in records):
        parts.append("not yet verified on a GPU")
    need = fast_path_requirement(slug)
    if need:
        (major, minor), reason = need
        parts.append(f"fast path needs sm_{major}{minor}" + (f" ({reason})" if reason else ""))
    else:
        parts.append("runs on any CUDA GPU Triton supports")
    body = " · ".join(parts)
    # Status, not content: kept out of the search index, where its words (torch, triton, GPU,
    # verified) matched every page's first entry for any question that named them.
    return f'<p class="academy-verified" data-search-exclude><small><strong>Verified:</strong> {body}</small></p>\n'
