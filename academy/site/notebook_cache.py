"""Executed tutorials, cached by everything they read: a rebuild re-runs a notebook only when that changed.

mkdocs-jupyter executes each ``docs/tutorials/*.py`` and converts it to HTML
in one call, ``mkdocs_jupyter.convert.nb2html``. `install` wraps that
function (the hook calls it at the start of every build), and the wrapper
keeps the HTML in ``.cache/notebooks/<notebook>.json`` with what it was made
from:

* **the key**: the notebook's text, the conversion's options and the
  environment (`environment`: Python, every installed distribution and its
  version, torch and triton included, the device the kernels run on);
* **the dependencies**: every file of the repository the notebook's kernel
  read while it ran, each with the hash of its content, and every folder it
  listed, with the hash of the names in it. The kernel records them itself:
  an audit hook (`sys.addaudithook`), installed by an IPython startup file
  before the first cell, notes each file opened for reading and each folder
  listed under the repository. That covers the ``examples/`` and ``academy/``
  modules imported, directly or not, lazily or by a name built at run time
  (``importlib.import_module(f"examples.{slug}.bench")``), which no import
  graph read from the source sees; the results files and the example
  sections that ``academy.site.notebook`` reads; a new chapter folder that a
  glob over ``examples/`` would find.

A cached page is served when its key is the same and every dependency still
has its recorded hash; anything else executes the notebook afresh and stores
the new result. So an edit to the notebook, to a module it imports or to a
file it reads re-runs it, and nothing else does: another tutorial's module, a
Markdown page, a stylesheet. A result whose dependencies changed while it
executed is not stored. What the kernel cannot tell (a file that it only
checked for existence, and that appeared later; anything read outside the
repository other than the installed packages) is not tracked: delete
``.cache/notebooks/`` after such a change.

``ACADEMY_NB_CACHE=0`` turns the cache off, and the site tests' strict build
sets it (`academy.site.pytest_site`): there every notebook executes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from academy.chapters import REPO_ROOT

log = logging.getLogger("mkdocs.plugins.academy")

CACHE_DIR = REPO_ROOT / ".cache" / "notebooks"
SWITCH = "ACADEMY_NB_CACHE"
"""Environment variable: ``0``, ``false``, ``off`` or ``no`` turns the cache off."""
TRACE_FILE = "ACADEMY_NB_TRACE"
TRACE_ROOT = "ACADEMY_NB_TRACE_ROOT"

# Run by IPython in the kernel before the first cell (a startup file), in the
# notebook's namespace: one function, deleted once called, leaves no names there.
# Each line of the trace is "f <path>" (a file opened for reading) or "d <path>"
# (a folder listed); paths under the repository only, none under a hidden folder
# (.venv, .git, .cache), and not the repository's own folder listing, which the
# import system reads for every import and which changes with every stray file.
TRACER = """
def _academy_trace():
    import os, sys
    root = os.environ[{root!r}]
    out = open(os.environ[{trace!r}], "a", buffering=1)
    seen = set()
    writes = set("wax+")

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if mode is not None and writes.intersection(mode):
                return
            if mode is None and (flags or 0) & os.O_ACCMODE != os.O_RDONLY:
                return
            kind = "f"
        elif event in ("os.listdir", "os.scandir"):
            path, kind = args[0], "d"
        else:
            return
        if path is None:
            path = "."
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor
        path = os.path.abspath(os.fsdecode(path))
        rel = os.path.relpath(path, root)
        if rel == "." or rel.startswith((".", os.sep)) or (kind, rel) in seen:
            return
        seen.add((kind, rel))
        out.write(f"{{kind}} {{rel}}\\n")

    sys.addaudithook(hook)


_academy_trace()
del _academy_trace
"""


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the cache is on: unless ``ACADEMY_NB_CACHE`` says 0, false, off or no."""
    return environ.get(SWITCH, "1").strip().lower() not in {"0", "false", "off", "no"}


def environment() -> str:
    """What the output depends on besides the repository: Python, the installed distributions, the device."""
    from academy import DEVICE

    device = DEVICE
    if DEVICE == "cuda":
        import torch

        device = f"cuda {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    dists = sorted({f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()})
    return "\n".join([sys.version, platform.machine(), f"device={device}", *dists])


def notebook_key(path: Path, options: Mapping[str, object], env: str) -> str:
    """The hash of the notebook's text, the conversion's options and the environment."""
    digest = hashlib.sha256(Path(path).read_bytes())
    digest.update(repr(sorted(options.items())).encode())
    digest.update(env.encode())
    return digest.hexdigest()


def _listing(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name != "__pycache__" and not name.startswith("."))


def fingerprint(kind: str, rel: str, root: Path = REPO_ROOT) -> str | None:
    """The hash of a file's content (``kind`` ``"f"``) or of a folder's names (``"d"``); None if it is gone."""
    path = root / rel
    try:
        if kind == "d":
            return hashlib.sha256("\n".join(_listing(path)).encode()).hexdigest()
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _source_of(rel: str, root: Path) -> str:
    """A compiled module (``pkg/__pycache__/mod.cpython-311.pyc``) stands for its source (``pkg/mod.py``)."""
    path = Path(rel)
    if path.parent.name == "__pycache__" and path.suffix == ".pyc":
        source = path.parent.parent / (path.name.split(".")[0] + ".py")
        if (root / source).is_file():
            return source.as_posix()
    return path.as_posix()


def read_trace(text: str, root: Path = REPO_ROOT) -> set[tuple[str, str]]:
    """The ``(kind, path)`` dependencies of a kernel's trace."""
    deps = set()
    for line in text.splitlines():
        kind, _, rel = line.partition(" ")
        if kind in {"f", "d"} and rel:
            deps.add((kind, _source_of(rel, root) if kind == "f" else Path(rel).as_posix()))
    return deps


@dataclass
class Entry:
    """One cached notebook: the key it was made under, its dependencies, its HTML.

    ``deps`` maps ``"f path"`` (a file) or ``"d path"`` (a folder) to its `fingerprint`;
    None for one the kernel looked for and did not find, which must still be missing.
    """

    key: str
    deps: dict[str, str | None]
    html: str

    def fresh(self, key: str, root: Path = REPO_ROOT) -> bool:
        """Made under ``key``, and every dependency is as it was."""
        if key != self.key:
            return False
        for dep, digest in self.deps.items():
            kind, _, rel = dep.partition(" ")
            if fingerprint(kind, rel, root) != digest:
                return False
        return True


def entry_path(notebook: Path, cache_dir: Path = CACHE_DIR, root: Path = REPO_ROOT, step: str = "nb2html") -> Path:
    """Where a notebook's output of one conversion (``nb2html``, ``nb2md``) is kept."""
    rel = Path(notebook).resolve().relative_to(root).with_suffix("")
    return cache_dir / ("__".join(rel.parts) + ("" if step == "nb2html" else f".{step}") + ".json")


def load(path: Path) -> Entry | None:
    try:
        return Entry(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def store(path: Path, entry: Entry) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(entry)))
    os.replace(tmp, path)


@contextlib.contextmanager
def traced(root: Path = REPO_ROOT) -> Iterator[Path]:
    """Kernels started inside record what they read (TRACER) in the file yielded.

    IPython runs the startup files of the profile in ``IPYTHONDIR``; a fresh one
    holds only the tracer, so no personal IPython settings reach the notebooks.
    """
    saved = {name: os.environ.get(name) for name in ("IPYTHONDIR", TRACE_FILE, TRACE_ROOT)}
    with tempfile.TemporaryDirectory(prefix="academy-nb-") as tmp:
        startup = Path(tmp, "ipython", "profile_default", "startup")
        startup.mkdir(parents=True)
        (startup / "00-academy-trace.py").write_text(TRACER.format(root=TRACE_ROOT, trace=TRACE_FILE))
        trace = Path(tmp, "trace.txt")
        trace.touch()
        os.environ.update({"IPYTHONDIR": str(Path(tmp, "ipython")), TRACE_FILE: str(trace), TRACE_ROOT: str(root)})
        try:
            yield trace
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def cached_convert(
    convert: Callable[..., str],
    nb_path: str,
    *,
    env: str,
    cache_dir: Path = CACHE_DIR,
    root: Path = REPO_ROOT,
    **options,
) -> str:
    """``convert(nb_path, **options)``, a conversion of mkdocs-jupyter's, from the cache when nothing it read changed.

    An executing conversion (``nb2html`` with ``execute=True``) depends on what
    its kernel read; one that does not execute (``nb2md``, which the table of
    contents comes from) on the notebook's text alone.
    """
    step = getattr(convert, "__name__", "nb2html")
    notebook = Path(nb_path).resolve()
    name = notebook.relative_to(root).as_posix()
    key = notebook_key(notebook, {"step": step, **options}, env)
    where = entry_path(notebook, cache_dir, root, step)
    entry = load(where)
    if entry is not None and entry.fresh(key, root):
        if options.get("execute"):
            log.info("academy: %s from the notebook cache (nothing it reads changed)", name)
        return entry.html
    started = time.time_ns()
    if options.get("execute"):
        with traced(root) as trace:
            html = convert(nb_path, **options)
            deps = read_trace(trace.read_text(), root) | {("f", name)}
    else:
        html, deps = convert(nb_path, **options), {("f", name)}
    recorded = {f"{kind} {rel}": fingerprint(kind, rel, root) for kind, rel in sorted(deps)}
    changed = [dep for dep in recorded if (root / dep[2:]).exists() and (root / dep[2:]).stat().st_mtime_ns > started]
    if changed or notebook_key(notebook, {"step": step, **options}, env) != key:
        log.info("academy: %s not cached: %s changed while it ran", name, ", ".join(changed) or "the notebook")
    else:
        store(where, Entry(key, recorded, html))
    return html


def install(on: bool = True) -> None:
    """Wrap mkdocs-jupyter's ``nb2html`` and ``nb2md`` with the cache (``on``), or put the originals back."""
    from mkdocs_jupyter import convert

    env = environment() if on else ""
    for step in ("nb2html", "nb2md"):
        current = getattr(convert, step)
        original = getattr(current, "__wrapped__", current)
        wrapper = functools.partial(cached_convert, original, env=env)
        setattr(convert, step, functools.update_wrapper(wrapper, original) if on else original)
