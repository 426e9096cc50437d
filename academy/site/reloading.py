"""The import graph of the ``academy`` package, and ``mkdocs serve`` rebuilding with the code as it is now.

MkDocs imports the build hook once per process, and Python keeps every module
it imported: an edit to ``academy/bench/render.py`` triggers a rebuild
(``mkdocs.yml`` watches ``academy/``) but the page would keep the old output.
So the hook's ``on_config`` calls `reload_modules` at the start of every
build: each module of `RELOADED` already imported is reloaded, after the
``academy`` modules it imports, so ``from academy.bench.render import table``
in a later one binds the new ``table``.

The order comes from `import_graph`, read from the source with
`ast` (imports at module level and inside functions both; each file's
imports remembered by its text, `academy.site.memo`);
``tests/site/test_imports.py`` checks that the graph has no cycle.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from academy.site import memo

PACKAGE_DIR = Path(__file__).resolve().parents[1]
RELOADED = ("academy.bench", "academy.site")
# The hook is the caller (MkDocs loads it under its path, not this name); pytest plugins are not the build's.
NOT_RELOADED = ("academy.site.hooks", "academy.site.pytest_site", "academy.site.pytest_verified")


def module_files(package: str = "academy", package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every module of a package: dotted name -> file (``__init__.py`` for a package)."""
    found = {}
    for path in sorted(Path(package_dir).rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, modules: Collection[str]) -> str | None:
    """The longest prefix of a dotted name that is one of ``modules``."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def imports_of(path: Path, name: str, modules: Collection[str]) -> set[str]:
    """The ``modules`` that a module's file imports, anywhere in it; a package's ``__init__`` is not counted
    for its submodules (importing ``a.b.c`` runs ``a`` and ``a.b`` first, never a cycle)."""
    text = Path(path).read_text()
    key = "\0".join([str(path), name, *sorted(modules), text])
    return set(memo.remember("imports_of", key, lambda: _imports_of(text, path, name, modules)))


def _imports_of(text: str, path: Path, name: str, modules: Collection[str]) -> frozenset[str]:
    package = name if Path(path).name == "__init__.py" else name.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(_known(f"{base}.{alias.name}", modules) or _known(base, modules))
    found.discard(None)
    found.discard(name)
    return frozenset(found)  # type: ignore[arg-type]


def import_graph(package: str = "academy", package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    files = module_files(package, package_dir)
    return {name: imports_of(path, name, files) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as ``[a, b, ..., a]``, or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(reversed(err.args[1]))
    return None


def reload_modules(
    prefixes: Sequence[str] = RELOADED,
    skip: Collection[str] = NOT_RELOADED,
    package: str = "academy",
    package_dir: Path = PACKAGE_DIR,
) -> list[str]:
    """Reload every imported module under ``prefixes`` (but ``skip``), each after those it imports; their names."""
    importlib.invalidate_caches()
    wanted = [
        name
        for name in graphlib.TopologicalSorter(import_graph(package, package_dir)).static_order()
        if name in sys.modules and name not in skip and any(name == p or name.startswith(p + ".") for p in prefixes)
    ]
    for name in wanted:
        importlib.reload(sys.modules[name])
    return wanted
