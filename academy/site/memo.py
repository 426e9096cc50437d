"""Pure steps of a build, remembered by their input for the life of the process: ``mkdocs serve`` redoes what changed.

``mkdocs serve`` rebuilds the whole site after every save, and most of a
rebuild repeated work whose input had not changed. Each step here is a pure
function of what is named in its key, so its result is remembered under the
hash of that key (`remember`) and a rebuild computes it again only where the
input changed:

* **Material's search parse** (`material.plugins.search.plugin.Parser`):
  the search plugin splits every built page into sections with an HTML
  parser, about a third of a rebuild on the tutorials' large pages.
  `install` puts `SearchParser` in its place, which parses a page's HTML
  once and hands out copies of its sections afterwards;
* **Pygments' highlighting of a code block** (`highlight`, in place of the
  ``highlight`` that ``pymdownx.highlight`` calls): its HTML is a function of
  the code, the lexer and the formatter with their options, all in the key;
* **a Markdown page's conversion to HTML** (`render`, in place of MkDocs'
  ``Page.render``): keyed by the page's Markdown (after the hook expanded
  it), its path and URL, the Markdown settings, every file of the site
  (links resolve against them), `world` (the code that snippet lines include
  lives under ``examples/`` and ``academy/``) and any other file a snippet
  line names. What the conversion leaves on the page (HTML, table of
  contents, title, anchors, links to other pages' anchors, which MkDocs
  checks afterwards against the pages of this build) is put back, and the
  anchors it registered with mkdocs-autorefs are registered again. A page
  with a mkdocstrings block (``:::``) is always converted: mkdocstrings keeps
  state of its own;
* **the theme's compiled templates** (`theme_templates`): Jinja's own
  bytecode cache, in memory, keyed by the template's name and the checksum
  of its source;
* **the hook's own page steps** (``academy.site.hooks``): a page's Markdown
  with its directives expanded and its prose checked, its HTML with the
  badge and the download links, a notebook page's search entries. What they
  read besides the page is the code and the data under ``academy/``,
  ``examples/`` and ``tests/`` (results, kernels, verified records, the
  chapters' tests), ``mkdocs.yml`` and which pages exist, so their keys hold `world`, the
  hash of all of that, taken once per build: a Markdown edit leaves it as it
  was, any edit there changes it and every page is made afresh.

What a step logs while it computes (a stale-results note, a warning that
``--strict`` counts) is logged again each time its result is reused.

The remembered results live in `STORE`, which a reload of this module
(`academy.site.reloading`, at the start of every rebuild) keeps. A
library's code does not change while the process runs; an edit to the
``academy`` code changes `world`. A one-off ``mkdocs build`` gains little.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from academy.chapters import REPO_ROOT

try:
    import jinja2
except ImportError:  # pragma: no cover - MkDocs brings it
    jinja2 = None

T = TypeVar("T")

LIMIT = 4096
"""Results kept per step (least recently used dropped): the site has some 400 code blocks and 35 pages."""

WORLD_CONTENT = ("academy", "examples", "tests", "overrides", "mkdocs.yml")
"""Folders (and files) whose every file's content is in `world`."""
WORLD_NAMES = ("docs",)
"""Folders whose file names (not contents: a page's own text is in its key) are in `world`."""

# Kept across reloads of this module: the point is to outlive a rebuild.
STORE: dict[str, OrderedDict[str, tuple[object, list[logging.LogRecord]]]] = globals().get("STORE") or {}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def remember(step: str, key: str, compute: Callable[[], T]) -> T:
    """``compute()``, a pure function of ``key``, remembered under ``step`` and the hash of ``key``;
    what it logged (under ``mkdocs``) is logged again when it is reused. An exception is not remembered."""
    memo = STORE.setdefault(step, OrderedDict())
    digest = hashlib.sha256(key.encode()).hexdigest()
    if digest in memo:
        memo.move_to_end(digest)
        value, records = memo[digest]
        for record in records:
            logging.getLogger(record.name).handle(record)
        return value  # type: ignore[return-value]
    capture, logger = _Records(), logging.getLogger("mkdocs")
    logger.addHandler(capture)
    try:
        value = compute()
    finally:
        logger.removeHandler(capture)
    memo[digest] = (value, capture.records)
    while len(memo) > LIMIT:
        memo.popitem(last=False)
    return value


def world(root: Path = REPO_ROOT) -> str:
    """The hash of every file under `WORLD_CONTENT` (path and content) and of the file names under `WORLD_NAMES`."""
    digest = hashlib.sha256()
    for folder, content in [*((f, True) for f in WORLD_CONTENT), *((f, False) for f in WORLD_NAMES)]:
        if not (root / folder).exists():
            digest.update(f"no {folder}\0".encode())
            continue
        walk = os.walk(root / folder) if (root / folder).is_dir() else [(root, [], [folder])]
        for dirpath, dirnames, filenames in walk:
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath, name)
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                if content:
                    digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _material_parser():
    from material.plugins.search import plugin

    return plugin, getattr(plugin.Parser, "__wrapped__", plugin.Parser)


class SearchParser:
    """Material's search ``Parser`` as ``add_entry_from_context`` uses it (``feed``, ``close``, ``data``), remembered.

    The sections handed out are shallow copies: Material only reassigns a
    section's ``title`` (to the page's title, when the section has none),
    never changes the remembered lists in place.
    """

    def __init__(self, *args, **kwargs):
        self._args, self._kwargs, self._html = args, kwargs, []
        self.data: list = []

    def feed(self, data: str) -> None:
        self._html.append(data)

    def close(self) -> None:
        html = "".join(self._html)
        sections = remember("material-search-parse", html, lambda: self._parse(html))
        self.data = [copy.copy(section) for section in sections]

    def _parse(self, html: str) -> list:
        _, original = _material_parser()
        parser = original(*self._args, **self._kwargs)
        parser.feed(html)
        parser.close()
        return parser.data


def _options(obj) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}{sorted(obj.options.items())!r}"


def highlight(code: str, lexer, formatter, outfile=None):
    """``pygments.highlight``, remembered by the code, the lexer's and the formatter's types and options."""
    import pygments

    if outfile is not None:
        return pygments.highlight(code, lexer, formatter, outfile)
    key = "\0".join([_options(lexer), _options(formatter), code])
    return remember("pygments-highlight", key, lambda: pygments.highlight(code, lexer, formatter))


MKDOCSTRINGS_BLOCK = re.compile(r"^\s*::: ", re.MULTILINE)
SNIPPET_LINE = re.compile(r"""--8<--\s+["']([^"':]+)""")


def _render_key(page, config, files, world_hash: str) -> str | None:
    """Everything a Markdown page's conversion reads; None for a page that must always be converted."""
    markdown = page.markdown
    if markdown is None or MKDOCSTRINGS_BLOCK.search(markdown):
        return None
    snippets = []
    for name in sorted(set(SNIPPET_LINE.findall(markdown))):
        path = REPO_ROOT / name
        snippets.append(f"{name}={hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None}")
    site = "\n".join(sorted(f"{f.src_uri} {f.dest_uri} {f.url} {f.inclusion}" for f in files))
    # Extensions that plugins add are objects, new each build: named by their type (their settings come
    # from mkdocs.yml, which is in `world`).
    extensions = [
        e if isinstance(e, str) else f"{type(e).__module__}.{type(e).__qualname__}"
        for e in config["markdown_extensions"]
    ]
    settings = repr([extensions, config["mdx_configs"], config["validation"]])
    return "\0".join([world_hash, page.file.src_uri, page.url, settings, site, *snippets, markdown])


def render(original: Callable, world_hash: str, page, config, files) -> None:
    """MkDocs' ``Page.render`` (``original``), remembered by `_render_key`: see the module's docstring."""
    key = _render_key(page, config, files, world_hash)
    if key is None:
        return original(page, config, files)
    autorefs = config.plugins.get("autorefs") if hasattr(config, "plugins") else None
    computed = []

    def convert():
        registered = []
        if autorefs is not None:  # record what the conversion registers, to register it again later
            live = autorefs.register_anchor

            def register_anchor(page, *args, **kwargs):
                registered.append((args, kwargs))
                return live(page, *args, **kwargs)

            autorefs.register_anchor = register_anchor
        try:
            original(page, config, files)
        finally:
            if autorefs is not None:
                del autorefs.register_anchor
        computed.append(True)
        links = getattr(page, "links_to_anchors", None)
        links = None if links is None else {f.src_uri: dict(anchors) for f, anchors in links.items()}
        anchors = set(page.present_anchor_ids or ())
        return page.content, copy.deepcopy(page.toc), page._title_from_render, anchors, links, registered

    content, toc, title, anchors, links, registered = remember("page-render", key, convert)
    if computed:
        return None
    page.content, page.toc, page._title_from_render = content, copy.deepcopy(toc), title
    page.present_anchor_ids = set(anchors)
    if links is not None:
        page.links_to_anchors = {files.get_file_from_path(uri): dict(a) for uri, a in links.items()}
    for args, kwargs in registered:
        autorefs.register_anchor(page, *args, **kwargs)
    return None


class _TemplateCache(jinja2.BytecodeCache if jinja2 else object):
    """Jinja's bytecode cache, in `STORE`: a template is compiled again only when its source changes."""

    def load_bytecode(self, bucket) -> None:
        stored = STORE.setdefault("jinja-bytecode", OrderedDict()).get(bucket.key)
        if stored is not None and stored[0] == bucket.checksum:
            bucket.code = stored[1]

    def dump_bytecode(self, bucket) -> None:
        STORE.setdefault("jinja-bytecode", OrderedDict())[bucket.key] = (bucket.checksum, bucket.code)


def theme_templates(env):
    """The theme's Jinja environment, with `_TemplateCache` (MkDocs makes a new one, and compiles anew, each build)."""
    if env.bytecode_cache is None:
        env.bytecode_cache = _TemplateCache()
    return env


def install(on: bool = True, world_hash: str | None = None) -> None:
    """Put `SearchParser`, `highlight` and (given `world`) `render` in place (``on``), or the originals back."""
    from mkdocs.structure.pages import Page

    original_render = getattr(Page.render, "__wrapped__", Page.render)
    Page.render = original_render
    if on and world_hash is not None:

        @functools.wraps(original_render)
        def page_render(page, config, files):
            return render(original_render, world_hash, page, config, files)

        Page.render = page_render
    try:
        plugin, original = _material_parser()
    except ImportError:  # no Material, no search plugin to speed up
        pass
    else:
        plugin.Parser = type("SearchParser", (SearchParser,), {"__wrapped__": original}) if on else original
    try:
        import pygments
        from pymdownx import highlight as pymdownx_highlight
    except ImportError:
        return
    pymdownx_highlight.highlight = highlight if on else pygments.highlight
