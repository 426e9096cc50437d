"""MkDocs hook: expand ``<!-- bench:... -->`` directives into tables, plots and quoted numbers.

A thin adapter: it parses directives (a pure function, :func:`parse_directive`),
loads the chapter's results files and calls :mod:`academy.bench.render`.

Syntax (an HTML comment alone on its line, outside code fences; may be indented,
the output keeps the indentation)::

    <!-- bench:table SLUG [sweep=M=8192] [mode=fwd] [dtype=bfloat16] -->
    <!-- bench:plot SLUG [sweep=...] [mode=...] [dtype=...] -->
    <!-- bench:memory SLUG [sweep=...] [mode=...] [dtype=...] -->
    <!-- bench:summary SLUG -->
    <!-- bench:provenance SLUG -->
    <!-- bench:overview -->
    <!-- bench:dashboard -->
    <!-- bench:verified SLUG -->

``dashboard`` is every kernel × shape × GPU (:mod:`academy.dashboard`);
``verified`` is the verified-with badge (:mod:`academy.verified`), which the
hook also inserts by itself right under the title of every chapter page.
Every finished ``kernels/*.md`` page is also checked by
:mod:`academy.prose_numbers`: prose that quotes a measurement missing from the
chapter's results files fails the build.

A value is everything after the first ``=``, so ``sweep=M=8192`` means the sweep
``"M=8192"``; quote values with spaces. Unknown directives, slugs or keys fail
the build.
"""

from __future__ import annotations

import importlib
import logging
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from academy.bench import render
from academy.bench.results import Results, load
from academy.chapters import Chapter, all_chapters, chapter

log = logging.getLogger("mkdocs.plugins.academy")

# name -> (needs a slug, allowed keys)
DIRECTIVES: dict[str, tuple[bool, frozenset[str]]] = {
    "table": (True, frozenset({"sweep", "mode", "dtype"})),
    "plot": (True, frozenset({"sweep", "mode", "dtype"})),
    "memory": (True, frozenset({"sweep", "mode", "dtype"})),
    "summary": (True, frozenset()),
    "provenance": (True, frozenset()),
    "overview": (False, frozenset()),
    "dashboard": (False, frozenset()),
    "verified": (True, frozenset()),
}

LINE_RE = re.compile(r"^(?P<indent>[ \t]*)<!--\s*bench:(?P<body>.*?)-->[ \t]*$")
FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


class DirectiveError(ValueError):
    """A bench directive that cannot be rendered."""


@dataclass(frozen=True)
class Directive:
    name: str
    slug: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def parse_directive(body: str) -> Directive:
    """``"table fused_softmax sweep=M=8192"`` (the text after ``bench:``) -> :class:`Directive`."""
    try:
        tokens = shlex.split(body)
    except ValueError as err:
        raise DirectiveError(f"bench:{body.strip()}: {err}") from None
    if not tokens:
        raise DirectiveError("empty bench directive; expected bench:" + "|".join(DIRECTIVES))
    name, rest = tokens[0], tokens[1:]
    if name not in DIRECTIVES:
        raise DirectiveError(f"unknown directive bench:{name}; expected one of: {', '.join(DIRECTIVES)}")
    needs_slug, allowed = DIRECTIVES[name]
    positional = [t for t in rest if "=" not in t]
    options: dict[str, str] = {}
    for token in (t for t in rest if "=" in t):
        key, value = token.split("=", 1)
        if key not in allowed:
            hint = f"allowed: {', '.join(sorted(allowed))}" if allowed else "it takes no options"
            raise DirectiveError(f"bench:{name}: unknown key {key!r} ({hint})")
        if key in options:
            raise DirectiveError(f"bench:{name}: {key}= given twice")
        if not value:
            raise DirectiveError(f"bench:{name}: {key}= has no value")
        options[key] = value
    if needs_slug and len(positional) != 1:
        raise DirectiveError(f"bench:{name} takes exactly one chapter slug, got {positional or 'none'}")
    if not needs_slug and positional:
        raise DirectiveError(f"bench:{name} takes no slug, got {positional}")
    return Directive(name, positional[0] if needs_slug else None, options)


def expand(markdown: str, render_directive: Callable[[Directive], str]) -> str:
    """Replace each directive line (outside code fences) by ``render_directive``'s output, indented alike."""
    out, fence = [], None
    for number, line in enumerate(markdown.split("\n"), 1):
        opened = FENCE_RE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            out.append(line)
            continue
        if opened:
            fence = opened.group(1)
            out.append(line)
            continue
        match = LINE_RE.match(line)
        if match is None:
            out.append(line)
            continue
        try:
            text = render_directive(parse_directive(match.group("body")))
        except (DirectiveError, ValueError) as err:
            raise DirectiveError(f"line {number}: {err}") from err
        indent = match.group("indent")
        out.extend(indent + l if l.strip() else "" for l in text.rstrip("\n").split("\n"))
    return "\n".join(out)


# --------------------------------------------------------------------------- files


def headline(slug: str) -> render.Headline:
    """The headline cases of ``examples/<slug>/bench.py`` (its ``SPEC.headline``)."""
    name = chapter(slug).bench_module
    try:
        return tuple(importlib.import_module(name).SPEC.headline)
    except (ImportError, AttributeError) as err:
        raise DirectiveError(f"{slug}: cannot read the headline cases from {name}.SPEC: {err}") from err


_logged_stale: set[tuple[str, str]] = set()


def load_results(ch: Chapter) -> list[Results]:
    """Every results file of a chapter; stale ones are logged once (INFO, so --strict still passes)."""
    paths = ch.results_files()
    results = [load(path) for path in paths]
    current = ch.code_hash()
    for res, path in zip(results, paths):
        if res.provenance.kernel_hash != current and (str(path), current) not in _logged_stale:
            _logged_stale.add((str(path), current))
            log.info("academy: stale results %s (kernel hash %s, now %s)", path, res.provenance.kernel_hash, current)
    return results


def not_measured(slug: str) -> str:
    return (
        f'!!! note "Not measured yet"\n\n'
        f"    `{slug}` has no results file yet. On a machine with a GPU run `academy bench {slug}` "
        f"and commit `examples/{slug}/results/<gpu>.json`.\n"
    )


def per_gpu(results: list[Results], draw: Callable[[Results], str]) -> str:
    """One result: its output; several: one pymdownx.tabbed tab per GPU."""
    if len(results) == 1:
        return draw(results[0])
    tabs = []
    for res in sorted(results, key=render.gpu_label):
        body = "\n".join("    " + l if l.strip() else "" for l in draw(res).rstrip("\n").split("\n"))
        tabs.append(f'=== "{render.gpu_label(res)}"\n\n{body}\n')
    return "\n".join(tabs)


def render_directive(d: Directive, noted: set[str] | None = None) -> str:
    """Render one directive; ``noted`` collects slugs whose "not measured" note a page already shows."""
    if d.name == "overview":
        everything, heads, hashes, pages = [], {}, {}, {}
        for ch in all_chapters():
            found = load_results(ch)
            if found:
                everything += found
                hashes[ch.slug] = ch.code_hash()
                pages[ch.slug] = ch.nav_path
                try:
                    heads[ch.slug] = headline(ch.slug)
                except DirectiveError:
                    pass  # the overview falls back to the geometric mean over all cases
        return render.overview(everything, headlines=heads, current_hashes=hashes, pages=pages)
    if d.name == "dashboard":
        from academy.dashboard import dashboard

        return dashboard(_nav_titles)
    if d.name == "verified":
        from academy.verified import badge

        return badge(chapter(d.slug).slug)
    ch = chapter(d.slug)
    results = load_results(ch)
    if not results:
        if noted is not None and d.slug in noted:
            return ""
        if noted is not None:
            noted.add(d.slug)
        return not_measured(d.slug)
    if d.name == "table":
        return per_gpu(results, lambda r: render.table(r, **d.options))
    if d.name == "plot":
        return per_gpu(results, lambda r: render.plot(r, **d.options))
    if d.name == "memory":
        return per_gpu(results, lambda r: render.memory(r, **d.options))
    if d.name == "summary":
        cases = headline(d.slug)
        return per_gpu(results, lambda r: render.summary(r, cases))
    current = ch.code_hash()
    return per_gpu(results, lambda r: render.provenance(r, current_kernel_hash=current))


_nav_titles: dict[str, str] = {}  # slug -> the nav's title of its page, for the dashboard


def _collect_titles(nav, titles: dict[str, str]) -> None:
    for item in nav or []:
        if isinstance(item, dict):
            for title, value in item.items():
                if isinstance(value, str):
                    stem = value.rsplit("/", 1)[-1].rsplit(".", 1)[0]
                    titles.setdefault(stem, title)
                else:
                    _collect_titles(value, titles)


def on_config(config, **kwargs):
    _nav_titles.clear()
    _collect_titles(config.get("nav"), _nav_titles)
    return config


def chapter_of_page(src_path: str) -> Chapter | None:
    """The chapter whose page this is (``Chapter.page``), if any."""
    for ch in all_chapters():
        if ch.nav_path == src_path:
            return ch
    return None


def on_page_markdown(markdown, page=None, **kwargs):
    from mkdocs.exceptions import PluginError

    where = page.file.src_path if page is not None else "?"
    if where.startswith("kernels/") and where.endswith(".md"):
        from academy.prose_numbers import check_markdown

        problems = check_markdown(markdown, where)
        if problems:
            raise PluginError(
                "academy: prose quotes numbers that no results file holds (rule: academy/prose_numbers.py):\n  "
                + "\n  ".join(problems)
            )
    ch = chapter_of_page(where)
    if ch is not None and where.endswith(".md") and "bench:verified" not in markdown:
        from academy.verified import insert_badge

        markdown = insert_badge(markdown, ch.slug)
    try:
        noted: set[str] = set()  # one "not measured yet" note per chapter per page
        return expand(markdown, lambda d: render_directive(d, noted))
    except DirectiveError as err:
        raise PluginError(f"academy bench directive in {where}, {err}") from err


def on_page_content(html, page=None, **kwargs):
    """Notebook chapter pages (tutorials that own a kernel) get the verified-with badge too:
    their Markdown never passes through ``on_page_markdown``, so it goes in after the first ``</h1>``."""
    where = page.file.src_path if page is not None else ""
    ch = chapter_of_page(where) if where.endswith(".py") else None
    if ch is None or "academy-verified" in html:
        return html
    from academy.verified import badge

    end = html.find("</h1>")
    if end < 0:
        return html
    # Inside a notebook cell the h1 sits in nested divs; close none of them, the badge is one <p>.
    end += len("</h1>")
    return html[:end] + "\n" + badge(ch.slug) + html[end:]


PRE_RE = re.compile(r"<pre>.*?</pre>", re.S)


def on_post_build(config, **kwargs):
    """Drop code blocks (``<pre>``) from the search index.

    Material's search worker downloads the whole index with the first page a
    reader opens, and the listings of kernel source were about 40% of it: the
    landing page's weight grew with every chapter towards the 1.5 MB bar
    (``tests/test_site_weight.py``). Prose, headings and inline code stay
    searchable (the reader-question test, ``tests/test_site_search.py``, runs on
    this index); the listings are on the pages and in ``examples/``.
    """
    import json
    from pathlib import Path

    path = Path(config["site_dir"]) / "search" / "search_index.json"
    if not path.is_file():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    for doc in data.get("docs", []):
        doc["text"] = PRE_RE.sub(" ", doc.get("text", ""))
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
