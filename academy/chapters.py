"""Where the chapters live: one folder under ``examples/`` per chapter slug."""

from __future__ import annotations

import ast
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = REPO_ROOT / "examples"
DOCS_DIR = REPO_ROOT / "docs"
TESTS_DIR = REPO_ROOT / "tests"


@dataclass(frozen=True)
class Chapter:
    """One kernel chapter, named by its snake_case slug."""

    slug: str

    @property
    def package(self) -> Path:
        return EXAMPLES_DIR / self.slug

    @property
    def kernel_file(self) -> Path:
        return self.package / "kernel.py"

    @property
    def bench_module(self) -> str:
        return f"examples.{self.slug}.bench"

    @property
    def results_dir(self) -> Path:
        return self.package / "results"

    @property
    def page(self) -> Path:
        """The chapter's page: a kernel deep-dive, or the tutorial that owns the kernel."""
        deep_dive = DOCS_DIR / "kernels" / f"{self.slug}.md"
        tutorial = DOCS_DIR / "tutorials" / f"{self.slug}.py"
        return tutorial if tutorial.is_file() and not deep_dive.is_file() else deep_dive

    @property
    def nav_path(self) -> str:
        """The page's path as mkdocs.yml's nav names it."""
        return self.page.relative_to(DOCS_DIR).as_posix()

    @property
    def tests_dir(self) -> Path:
        """The chapter's tests, all of them: ``academy check`` and the verified record run this folder."""
        return TESTS_DIR / self.slug

    def results_files(self) -> list[Path]:
        return sorted(self.results_dir.glob("*.json"))

    def code_files(self) -> list[Path]:
        """The code a results file measured: ``kernel.py``, every module under
        ``examples/`` that ``bench.py`` imports (anywhere in it, so lazy imports of
        a variant or of another chapter's kernel count too), and, transitively,
        the ``examples/`` modules those import; sorted."""
        bench = self.package / "bench.py"
        found: set[Path] = set()
        pending = [self.kernel_file] + ([bench] if bench.is_file() else [])
        while pending:
            path = pending.pop()
            if path in found:
                continue
            found.add(path)
            pending += _imported_example_modules(path)
        found.discard(bench)
        return sorted(found)

    def code_hash(self) -> str:
        """[`code_hash`][academy.chapters.code_hash] of ``kernel.py`` alone, or of every file in
        [`code_files`][academy.chapters.Chapter.code_files].

        The files' hashes are combined without their paths, so moving a shared
        module to another folder leaves the results that measured it fresh.
        """
        files = self.code_files()
        if files == [self.kernel_file]:
            return code_hash(self.kernel_file.read_text())
        parts = "\n".join(sorted(code_hash(p.read_text()) for p in files))
        return hashlib.sha256(parts.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=512)
def code_hash(source: str) -> str:
    """Hash of a module's syntax tree: blind to comments, blank lines and layout.

    Results record this hash of the kernel code they measured. Comments,
    formatting (quotes, line breaks, a formatter's run) and the order of a run
    of imports leave it unchanged, so
    editing an annotation on a page does not make the published numbers look
    stale, while any change to the code or its docstrings does. The tree is
    written out by `_tree_text` rather than ``ast.dump``, whose output
    differs between Python versions, and results are measured under whatever
    Python the GPU machine has.

    Memoized by the text (a pure function of it): a site build asks for the
    same files' hashes hundreds of times, and ``mkdocs serve`` once per rebuild.
    """
    module = ast.parse(source)
    module.body = _imports_sorted(module.body)
    return hashlib.sha256(_tree_text(module).encode()).hexdigest()[:16]


def _imports_sorted(body: list[ast.stmt]) -> list[ast.stmt]:
    """Each run of consecutive import statements in a canonical order.

    The order of imports is the linter's business (it puts ``academy`` before
    ``triton``); a re-sort changes nothing that a benchmark measures.
    """
    out: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for stmt in [*body, None]:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            run.append(stmt)
            continue
        out += sorted(run, key=_tree_text)
        run = []
        if stmt is not None:
            out.append(stmt)
    return out


def _tree_text(node: object) -> str:
    """A canonical text of an AST: node types and the fields that carry meaning.

    Empty and ``None`` fields are left out (newer Pythons add fields such as
    ``type_params``, empty in older code), as are expression contexts; runs of
    whitespace inside string constants collapse to one space, so a formatter
    re-indenting a docstring changes nothing.
    """
    if isinstance(node, ast.AST):
        fields = []
        for name, value in ast.iter_fields(node):
            if name == "ctx" or value is None or value == []:
                continue
            fields.append(f"{name}={_tree_text(value)}")
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(_tree_text(item) for item in node) + "]"
    if isinstance(node, str):
        return repr(" ".join(node.split()))
    return repr(node)


@functools.lru_cache(maxsize=512)
def _imported_modules(source: str) -> tuple[str, ...]:
    """The modules a module's source imports by absolute name, anywhere in it (memoized by the text)."""
    modules = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
    return tuple(modules)


def _imported_example_modules(path: Path) -> list[Path]:
    """The files of the ``examples.*`` modules that ``path`` imports, anywhere in it."""
    files = []
    for name in _imported_modules(path.read_text()):
        file = REPO_ROOT / Path(*name.split(".")).with_suffix(".py")
        if name.startswith("examples.") and file.is_file():
            files.append(file)
    return files


def all_chapters() -> list[Chapter]:
    """Every folder of ``examples/`` that holds a ``kernel.py``, sorted by slug."""
    return [Chapter(path.parent.name) for path in sorted(EXAMPLES_DIR.glob("*/kernel.py"))]


def chapter(slug: str) -> Chapter:
    found = Chapter(slug)
    if not found.kernel_file.is_file():
        known = ", ".join(c.slug for c in all_chapters()) or "none"
        raise ValueError(f"no chapter {slug!r}: expected {found.kernel_file} (known: {known})")
    return found
