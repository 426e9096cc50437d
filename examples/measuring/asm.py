"""What a Triton kernel compiles to: PTX, SASS, registers and spills.

The tool of the Learn tutorial "Measuring honestly" (``docs/tutorials/measuring.py``),
tested in ``tests/measuring/``. Two halves:

* **pure text functions** that pick the lines a reader should look at out of
  a PTX listing (:func:`interesting_ptx_lines`, :func:`global_accesses`,
  :func:`register_declarations`) or a SASS listing (:func:`sass_excerpt`).
  They run anywhere and are tested on small listings.
* **GPU functions** that compile a kernel for the GPU in this machine and
  read what Triton kept of each compilation stage
  (:func:`compile_kernel`, :func:`from_compiled`), and :func:`dump`, which
  writes one chapter kernel's listing to ``<out_dir>/<gpu>.asm.json`` so that
  the site, built on a machine without a GPU, can show it.

The listing files live in ``examples/<slug>/asm/``, *not* in ``results/``:
every ``results/*.json`` is read as a benchmark results file.

Triton's ``CompiledKernel`` has changed between releases; this module only
uses what 3.x releases share (``asm`` as a dict of stage name to text or
bytes, ``metadata.num_warps``, and ``n_regs``/``n_spills`` once the binary
is loaded) and treats everything else as optional.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from academy import INTERPRETED
from academy.chapters import EXAMPLES_DIR, chapter

# ---------------------------------------------------------------- PTX and SASS text

_GLOBAL_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[A-Za-z0-9_:]+)*)")
_REGISTER_DECL = re.compile(r"\.reg\s+\.(\w+)\s+(%\w+?)<(\d+)>")
_SPECIAL = re.compile(r"%(ctaid|tid|nctaid|ntid)\.[xyz]")
_TYPE_SUFFIX = re.compile(r"^[bfsu](\d+)$")


def _code(line: str) -> str:
    """A PTX line without its ``//`` comment and surrounding blanks."""
    return line.split("//", 1)[0].strip()


def interesting_ptx_lines(ptx: str) -> list[str]:
    """The PTX lines that say how a kernel touches memory and who it is.

    Kept, in order of appearance and stripped of comments: register
    declarations (``.reg .f32 %f<9>;``), global loads and stores
    (``ld.global`` / ``st.global``, with their vector width), and reads of
    the block and thread indices (``%ctaid.x``, ``%tid.x``, ...).
    """
    kept = []
    for line in ptx.splitlines():
        code = _code(line)
        if not code:
            continue
        if _REGISTER_DECL.search(code) or _GLOBAL_ACCESS.search(code) or _SPECIAL.search(code):
            kept.append(code)
    return kept


@dataclass(frozen=True)
class GlobalAccess:
    """One ``ld.global`` or ``st.global`` instruction."""

    op: str  # "ld" or "st"
    vector: int  # elements per instruction: 1, 2 or 4 (the .v2/.v4 suffix)
    bits: int  # bits per element (the .b32/.f16/... suffix)
    predicated: bool  # starts with @%p: masked

    @property
    def bytes(self) -> int:
        """Bytes one thread moves with this instruction."""
        return self.vector * self.bits // 8


def global_accesses(ptx: str) -> list[GlobalAccess]:
    """Every global load and store of a PTX listing, with its width."""
    found = []
    for line in ptx.splitlines():
        code = _code(line)
        match = _GLOBAL_ACCESS.search(code)
        if not match:
            continue
        vector, bits = 1, 0
        for part in match.group(2).split("."):
            if part in ("v2", "v4", "v8"):
                vector = int(part[1:])
            elif _TYPE_SUFFIX.match(part):
                bits = int(part[1:])
        found.append(GlobalAccess(match.group(1), vector, bits, code.startswith("@")))
    return found


def register_declarations(ptx: str) -> dict[str, int]:
    """Virtual registers declared per PTX register family: ``{"%f": 9, "%r": 12, ...}``.

    These are PTX's *virtual* registers, as many as the code generator liked;
    ``ptxas`` allocates the real ones (``n_regs``) when it builds the binary.
    """
    counts: dict[str, int] = {}
    for line in ptx.splitlines():
        for _, family, count in _REGISTER_DECL.findall(_code(line)):
            counts[family] = counts.get(family, 0) + int(count)
    return counts


_SASS_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")
_SASS_CONTROL = re.compile(r"^\s*[0-9-]{2}:[0-9-]:[0-9-]:[Y-]:[0-9a-f]\s+")  # Triton's stall/barrier prefix
_SASS_INTERESTING = re.compile(r"\b(LDG|STG|LDS|STS|S2R|S2UR|EXIT|BRA|FFMA|FADD|FMUL|MUFU)\b")


def sass_instructions(sass: str) -> list[str]:
    """The instructions of a ``cuobjdump -sass`` listing, without addresses and encodings.

    Text without cuobjdump's ``/*0010*/`` addresses (as Triton's own
    disassembler prints it) is taken line by line, blank and comment lines dropped.
    """
    found = _SASS_INSTRUCTION.findall(sass)
    if found:
        return found
    lines = [_SASS_CONTROL.sub("", line.split("/*", 1)[0]).strip().rstrip(";").strip() for line in sass.splitlines()]
    return [line for line in lines if line and not line.endswith(":") and not line.startswith(("//", ".", "Function"))]


def sass_excerpt(sass: str, limit: int = 40) -> list[str]:
    """Up to ``limit`` SASS instructions worth reading: memory, special registers, math, control."""
    return [ins for ins in sass_instructions(sass) if _SASS_INTERESTING.search(ins)][:limit]


# ---------------------------------------------------------------- compiling on a GPU


@dataclass
class KernelAsm:
    """What one compilation of a kernel produced."""

    name: str
    ptx: str
    sass: str | None  # None when no disassembler was found
    n_regs: int | None  # registers per thread, as allocated by ptxas
    n_spills: int | None  # registers spilled to local memory
    num_warps: int | None
    shared_bytes: int | None


def _require_gpu() -> None:
    if INTERPRETED:
        raise RuntimeError(
            "compiling to PTX/SASS needs a CUDA GPU: under TRITON_INTERPRET=1 kernels are interpreted, never compiled"
        )


def compile_kernel(kernel, *args, grid: Sequence[int] = (1,), **meta) -> KernelAsm:
    """Compile ``kernel`` for this GPU with example ``args`` and meta-parameters, without launching it.

    ``kernel.warmup`` runs the same specialisation as a launch (dtypes,
    divisibility of integer arguments by 16, constexprs), so the listing is
    the one a real call would run.
    """
    _require_gpu()
    return from_compiled(kernel.warmup(*args, grid=tuple(grid), **meta))


def compiled_kernels(kernel) -> list[Any]:
    """Every compiled variant of a ``@triton.jit`` function so far, oldest first.

    Walks ``kernel.device_caches`` (device -> a tuple whose first item is a
    dict of specialisation key -> CompiledKernel, in Triton 3.x releases).
    """
    found = []
    for entry in getattr(kernel, "device_caches", {}).values():
        parts = entry if isinstance(entry, tuple) else (entry,)
        for part in parts:
            if isinstance(part, dict):
                found += [value for value in part.values() if hasattr(value, "asm")]
    return found


def _metadata(compiled, name: str):
    return getattr(getattr(compiled, "metadata", None), name, None)


def _find_tool(name: str) -> str | None:
    try:
        from triton import knobs

        path = getattr(getattr(knobs.nvidia, name, None), "path", None)
        if path and Path(path).is_file():
            return path
    except Exception:  # older Triton without knobs, or no NVIDIA backend
        pass
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.is_file() else shutil.which(name)


def _disassemble(cubin: bytes) -> str | None:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        for tool, flags in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
            path = _find_tool(tool)
            if path is None:
                continue
            done = subprocess.run([path, *flags, file.name], capture_output=True, text=True, timeout=60)
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout
    return None


def _sass(compiled) -> str | None:
    cubin = compiled.asm.get("cubin") if hasattr(compiled.asm, "get") else None
    listing = _disassemble(cubin) if cubin else None
    if listing:  # cuobjdump's own listing: complete, with addresses
        return listing
    try:
        return compiled.asm["sass"]  # Triton's reformatted listing (3.x disassembles on first access)
    except Exception:
        return None


def from_compiled(compiled) -> KernelAsm:
    """Read PTX, SASS, registers and spills out of a Triton ``CompiledKernel``."""
    init = getattr(compiled, "_init_handles", None)
    if callable(init):
        init()  # n_regs and n_spills are set when the binary is loaded onto the GPU
    return KernelAsm(
        name=str(getattr(compiled, "name", None) or _metadata(compiled, "name")),
        ptx=compiled.asm.get("ptx", ""),
        sass=_sass(compiled),
        n_regs=getattr(compiled, "n_regs", None),
        n_spills=getattr(compiled, "n_spills", None),
        num_warps=_metadata(compiled, "num_warps"),
        shared_bytes=_metadata(compiled, "shared"),
    )


# ---------------------------------------------------------------- listing files for the site


def asm_record(kernel_asm: KernelAsm, *, slug: str, kernel: str, gpu: str, triton_version: str) -> dict[str, Any]:
    """The JSON-ready summary of one listing: what the site shows, not the whole text."""
    accesses = global_accesses(kernel_asm.ptx)
    return {
        "slug": slug,
        "kernel": kernel,
        "gpu": gpu,
        "triton": triton_version,
        "n_regs": kernel_asm.n_regs,
        "n_spills": kernel_asm.n_spills,
        "num_warps": kernel_asm.num_warps,
        "shared_bytes": kernel_asm.shared_bytes,
        "ptx_registers": register_declarations(kernel_asm.ptx),
        "ptx_global_accesses": [
            {"op": a.op, "vector": a.vector, "bits": a.bits, "predicated": a.predicated} for a in accesses
        ],
        "ptx_lines": interesting_ptx_lines(kernel_asm.ptx),
        "ptx_line_count": len(kernel_asm.ptx.splitlines()),
        "sass": sass_excerpt(kernel_asm.sass) if kernel_asm.sass else None,
        "sass_instruction_count": len(sass_instructions(kernel_asm.sass)) if kernel_asm.sass else None,
    }


def asm_dir(slug: str) -> Path:
    """Where a chapter's listing files live: ``examples/<slug>/asm/``."""
    return EXAMPLES_DIR / slug / "asm"


def asm_files(slug: str) -> list[Path]:
    return sorted(asm_dir(slug).glob("*.asm.json"))


def load_asm(slug: str) -> list[dict[str, Any]]:
    """Every committed listing of a chapter (one per GPU), or ``[]``."""
    return [json.loads(path.read_text()) for path in asm_files(slug)]


def _run_chapter_once(slug: str) -> None:
    """Launch the chapter's own op once, on the first forward case of its benchmark spec."""
    from academy.bench.runner import load_spec

    import torch

    spec = load_spec(slug)
    cases = list(spec.cases())
    case = next((c for c in cases if c.mode == "fwd"), cases[0])
    inputs = spec.make_inputs(case, "cuda")
    spec.providers["academy"]()(*inputs)
    torch.cuda.synchronize()


def dump(
    slug: str, kernel_name: str, out_dir: Path | str | None = None, *, run: Callable[[], object] | None = None
) -> Path:
    """Compile one chapter kernel on this GPU and write ``<out_dir>/<gpu>.asm.json``.

    The kernel is compiled by running the chapter's op once on the first case
    of its benchmark spec (or by calling ``run()`` when given), so the listing
    is the specialisation the benchmarks time. ``out_dir`` defaults to
    ``examples/<slug>/asm/``. Returns the path written.
    """
    _require_gpu()
    from academy.bench.results import gpu_key

    import torch
    import triton

    module = importlib.import_module(f"examples.{slug}.kernel")
    kernel = getattr(module, kernel_name)
    (run or (lambda: _run_chapter_once(slug)))()
    variants = compiled_kernels(kernel)
    if not variants:
        raise RuntimeError(f"running {slug} did not compile {kernel_name}; pass run= to launch it")
    gpu = torch.cuda.get_device_name()
    record = asm_record(
        from_compiled(variants[-1]), slug=slug, kernel=kernel_name, gpu=gpu, triton_version=triton.__version__
    )
    record["kernel_hash"] = chapter(slug).code_hash()
    target = Path(out_dir) if out_dir is not None else asm_dir(slug)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{gpu_key(gpu)}.asm.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path
