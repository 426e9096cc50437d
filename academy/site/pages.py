"""The pages: the ``<!-- bench:... -->`` directive language and what a page becomes.

Plain text in, plain text out, no MkDocs: the build hook
(`academy.site.hooks`) hands every page to a [`Build`][academy.site.pages.Build], and the
tutorials' helpers ([`academy.site.notebook`][]) draw the same per-GPU views
from a code cell with [`Build.views`][academy.site.pages.Build.views].

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

``dashboard`` is every kernel × shape × GPU ([`academy.site.dashboard`][]);
``verified`` is the verified-with badge ([`academy.site.verified`][]), which
[`Build.page_html`][academy.site.pages.Build.page_html] also inserts by itself right under the title of every
chapter page, Markdown or notebook, that does not place it with the directive.
Every ``kernels/*.md`` page is also checked by [`academy.site.prose_numbers`][]:
prose that quotes a measurement missing from the chapter's results files fails
the build.

A value is everything after the first ``=``, so ``sweep=M=8192`` means the sweep
``"M=8192"``; quote values with spaces. Unknown directives, slugs or keys fail
the build.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from academy.bench import render
from academy.bench.results import Results, load
from academy.bench.summary import is_models_sweep, summarize
from academy.chapters import Chapter, all_chapters, chapter
from academy.site import downloads
from academy.site.dashboard import dashboard
from academy.site.headlines import headline
from academy.site.prose_numbers import check_markdown
from academy.site.verified import badge

log = logging.getLogger("mkdocs.plugins.academy")

# name -> (needs a slug, allowed keys)
DIRECTIVES: Mapping[str, tuple[bool, frozenset[str]]] = {
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
BADGE_CLASS = "academy-verified"  # the class of verified.badge's paragraph


class DirectiveError(ValueError):
    """A bench directive that cannot be rendered."""


class PageError(ValueError):
    """A page that cannot be built; the message says where and why."""


@dataclass(frozen=True)
class Directive:
    name: str
    slug: str | None = None
    options: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- the language


def make_directive(name: str, positional: Sequence[str] = (), options: Iterable[tuple[str, str]] = ()) -> Directive:
    """A checked `Directive`: known name, allowed keys given once with a value, one slug where needed."""
    if name not in DIRECTIVES:
        raise DirectiveError(f"unknown directive bench:{name}; expected one of: {', '.join(DIRECTIVES)}")
    needs_slug, allowed = DIRECTIVES[name]
    checked: dict[str, str] = {}
    for key, value in options:
        if key not in allowed:
            hint = f"allowed: {', '.join(sorted(allowed))}" if allowed else "it takes no options"
            raise DirectiveError(f"bench:{name}: unknown key {key!r} ({hint})")
        if key in checked:
            raise DirectiveError(f"bench:{name}: {key}= given twice")
        if not value:
            raise DirectiveError(f"bench:{name}: {key}= has no value")
        checked[key] = value
    if needs_slug and len(positional) != 1:
        raise DirectiveError(f"bench:{name} takes exactly one chapter slug, got {list(positional) or 'none'}")
    if not needs_slug and positional:
        raise DirectiveError(f"bench:{name} takes no slug, got {list(positional)}")
    return Directive(name, positional[0] if needs_slug else None, checked)


def parse_directive(body: str) -> Directive:
    """``"table fused_softmax sweep=M=8192"`` (the text after ``bench:``) -> `Directive`."""
    try:
        tokens = shlex.split(body)
    except ValueError as err:
        raise DirectiveError(f"bench:{body.strip()}: {err}") from None
    if not tokens:
        raise DirectiveError("empty bench directive; expected bench:" + "|".join(DIRECTIVES))
    rest = tokens[1:]
    options = [tuple(t.split("=", 1)) for t in rest if "=" in t]
    return make_directive(tokens[0], [t for t in rest if "=" not in t], options)


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


# --------------------------------------------------------------------------- layout


def not_measured(slug: str) -> str:
    return (
        f'!!! note "Not measured yet"\n\n'
        f"    `{slug}` has no results file yet. On a machine with a GPU run `academy bench {slug}` "
        f"and commit `examples/{slug}/results/<gpu>.json`.\n"
    )


def tabbed(views: Sequence[tuple[Results, str]]) -> str:
    """One GPU's view: itself; several: one pymdownx.tabbed tab per GPU."""
    if len(views) == 1:
        return views[0][1]
    tabs = []
    for res, text in sorted(views, key=lambda view: render.gpu_label(view[0])):
        body = "\n".join("    " + l if l.strip() else "" for l in text.rstrip("\n").split("\n"))
        tabs.append(f'=== "{render.gpu_label(res)}"\n\n{body}\n')
    return "\n".join(tabs)


def insert_badge(html: str, slug: str) -> str:
    """The verified-with badge right after the page's first ``</h1>``; a page without one is left as it is.

    Inside a notebook cell the h1 sits in nested divs: the badge is one ``<p>`` and closes none of them.
    """
    end = html.find("</h1>")
    if end < 0:
        return html
    end += len("</h1>")
    return html[:end] + "\n" + badge(slug) + html[end:]


# --------------------------------------------------------------------------- the site's pages


def nav_titles(nav) -> dict[str, str]:
    """slug (a page's file stem) -> its title in mkdocs.yml's nav; the first title wins."""
    titles: dict[str, str] = {}

    def walk(items) -> None:
        for item in items or []:
            if isinstance(item, dict):
                for title, value in item.items():
                    if isinstance(value, str):
                        titles.setdefault(value.rsplit("/", 1)[-1].rsplit(".", 1)[0], title)
                    else:
                        walk(value)

    walk(nav)
    return titles


def chapter_of_page(src_path: str) -> Chapter | None:
    """The chapter whose page this is (``Chapter.page``), if any."""
    for ch in all_chapters():
        if ch.nav_path == src_path:
            return ch
    return None


def _measuring_the_sweep(results: list[Results], sweep: str | None) -> list[Results]:
    """The results files that measured ``sweep`` (all of them when no sweep is named).

    A sweep added after one GPU's run (the model zoo, say) is drawn from the GPUs that have it; a
    sweep no file has is still an error, so a misspelt name fails the build.
    """
    having = [r for r in results if sweep is None or any(row.sweep == sweep for row in r.rows)]
    return having or results


class Build:
    """What one build of the site shares across its pages; the hook makes one per build.

    ``nav_titles`` (slug -> the nav's title) names the dashboard's sections. A
    stale results file is logged once per build (INFO, so ``--strict`` passes).
    """

    def __init__(self, nav_titles: Mapping[str, str] | None = None) -> None:
        self.nav_titles = dict(nav_titles or {})
        self.src_path: str | None = None  # the Markdown page being expanded
        self._stale_logged: set[tuple[str, str]] = set()

    def results(self, ch: Chapter) -> list[Results]:
        """Every results file of a chapter."""
        paths = ch.results_files()
        results = [load(path) for path in paths]
        current = ch.code_hash()
        for res, path in zip(results, paths):
            if res.provenance.kernel_hash != current and (str(path), current) not in self._stale_logged:
                self._stale_logged.add((str(path), current))
                old = res.provenance.kernel_hash
                log.info("academy: stale results %s (kernel hash %s, now %s)", path, old, current)
        return results

    def _results_file(self, slug: str, path) -> str:
        """The provenance block's last line: the results file, published with the site
        (`academy.site.downloads`), linked from the page being expanded."""
        link = downloads.results_link(slug, path.name, self.src_path)
        return f"\n    The measurements: {link} (every row, with its provenance).\n"

    def views(self, d: Directive, *, table_em: float = render.TABLE_EM) -> list[tuple[Results, str]]:
        """A per-GPU directive (table, plot, memory, summary, provenance) drawn from each results file;
        a table no wider than ``table_em`` (a tutorial's column is narrower than a page's)."""
        ch = chapter(d.slug)
        results = self.results(ch)
        if not results:
            return []
        if d.name in ("table", "plot", "memory"):
            measured = _measuring_the_sweep(results, d.options.get("sweep"))
            if d.name == "plot":
                return [(r, render.plot(r, **d.options)) for r in measured]
            draw = render.table if d.name == "table" else render.memory
            return [(r, draw(r, **d.options, width_em=table_em)) for r in measured]
        if d.name == "summary":
            cases = headline(d.slug)
            return [(r, render.summary(r, cases, summarize(r, {"models": is_models_sweep}))) for r in results]
        if d.name == "provenance":
            current = ch.code_hash()
            files = ch.results_files()
            return [
                (r, render.provenance(r, current_kernel_hash=current) + self._results_file(ch.slug, path))
                for r, path in zip(results, files)
            ]
        raise DirectiveError(f"bench:{d.name} is not drawn per GPU")

    def overview(self) -> str:
        everything, heads, hashes, pages = [], {}, {}, {}
        for ch in all_chapters():
            found = self.results(ch)
            if found:
                everything += found
                hashes[ch.slug] = ch.code_hash()
                pages[ch.slug] = ch.nav_path
                try:
                    heads[ch.slug] = headline(ch.slug)
                except ValueError:
                    pass  # the overview falls back to the geometric mean over all cases
        return render.overview(everything, headlines=heads, current_hashes=hashes, pages=pages)

    def render(self, d: Directive, noted: set[str] | None = None) -> str:
        """One directive's Markdown; ``noted`` collects slugs whose "not measured" note the page already shows."""
        if d.name == "overview":
            return self.overview()
        if d.name == "dashboard":
            return dashboard(self.nav_titles)
        if d.name == "verified":
            return badge(chapter(d.slug).slug)
        views = self.views(d)
        if views:
            return tabbed(views)
        if noted is not None and d.slug in noted:
            return ""
        if noted is not None:
            noted.add(d.slug)
        return not_measured(d.slug)

    def page_markdown(self, markdown: str, src_path: str) -> str:
        """A Markdown page, prose checked and directives expanded; [`PageError`][academy.site.pages.PageError]
        when it cannot be built."""
        if src_path.startswith("kernels/") and src_path.endswith(".md"):
            problems = check_markdown(markdown, src_path)
            if problems:
                raise PageError(
                    "academy: prose quotes numbers that no results file holds (rule: academy/site/prose_numbers.py):"
                    "\n  " + "\n  ".join(problems)
                )
        noted: set[str] = set()  # one "not measured yet" note per chapter per page
        self.src_path = src_path  # the results files' links are relative to it
        try:
            return expand(markdown, lambda d: self.render(d, noted))
        except DirectiveError as err:
            raise PageError(f"academy bench directive in {src_path}, {err}") from err

    def page_html(self, html: str, src_path: str) -> str:
        """A page's HTML with the verified-with badge under its title when it is a chapter's page without one."""
        ch = chapter_of_page(src_path)
        if ch is None or BADGE_CLASS in html:
            return html
        return insert_badge(html, ch.slug)
