"""Helpers for the executed tutorials (``docs/tutorials/*.py``).

A notebook page cannot use the snippet includes and hook directives of the
Markdown pages, so these functions do the same jobs from a code cell:

* [`show`][academy.site.notebook.show] displays a named section of a file under ``examples/``;
* [`answer`][academy.site.notebook.answer] displays an exercise's answer in a collapsed block;
* [`bench_table`][academy.site.notebook.bench_table] and [`bench_plot`][academy.site.notebook.bench_plot]
  render committed GPU results with the chapter pages' own views ([`academy.site.pages.Build.views`][]),
  one after another instead of in tabs (a note when nothing is measured yet).
"""

from __future__ import annotations

import html
import re

from academy.bench import render
from academy.chapters import REPO_ROOT, chapter
from academy.site import downloads, pages

ANNOTATION = re.compile(r"\s*# \(\d+\)!\s*$")


def section(ref: str) -> str:
    """The text of ``"path/to/file.py:name"`` between its ``--8<--`` markers.

    Marker lines of sections nested inside are dropped, as the snippet
    extension drops them from the Markdown pages, and so are the ``# (N)!``
    annotation markers: a notebook page has no annotation list to attach
    them to, so they would show as stray comments.
    """
    path, _, name = ref.partition(":")
    lines = (REPO_ROOT / path).read_text().splitlines()
    start, end = f"# --8<-- [start:{name}]", f"# --8<-- [end:{name}]"
    try:
        first = next(i for i, line in enumerate(lines) if line.strip() == start)
        last = next(i for i, line in enumerate(lines) if line.strip() == end)
    except StopIteration:
        raise ValueError(f"no section {name!r} in {path}") from None
    body = [ANNOTATION.sub("", line) for line in lines[first + 1 : last] if "# --8<-- [" not in line]
    return "\n".join(body)


def _markdown(text: str):
    from IPython.display import Markdown

    return Markdown(text)


def show(ref: str):
    """Display a named section of an example file as highlighted code."""
    return _markdown(f"```python\n{section(ref)}\n```")


def answer(ref: str, title: str = "Answer"):
    """Display a section collapsed under ``title``; the reader opens it."""
    from IPython.display import HTML
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = highlight(section(ref), PythonLexer(), HtmlFormatter(cssclass="highlight"))
    return HTML(f"<details class='success'><summary>{html.escape(title)}</summary>{code}</details>")


def _views(name: str, slug: str, filters: dict[str, str]):
    """The per-GPU views the pages' ``<!-- bench:NAME SLUG ... -->`` draws, checked the same way;
    tables fitted to a notebook's output column, narrower than a page's."""
    directive = pages.make_directive(name, [slug], filters.items())
    return pages.Build().views(directive, table_em=render.NOTEBOOK_TABLE_EM)


def _not_measured(slug: str):
    return _markdown(f"*Not measured on a GPU yet: run `academy bench {slug}` on one and commit the results file.*")


def bench_table(slug: str, **filters):
    """The results table(s) of a chapter, one per GPU measured (``sweep=``, ``mode=``, ``dtype=`` filter)."""
    views = _views("table", slug, filters)
    if not views:
        return _not_measured(slug)
    files = chapter(slug).results_files()  # in the order of the views
    parts = [
        f"**{render.gpu_label(r)}** ({r.provenance.date[:10]}; {downloads.results_link(slug, path.name)})\n\n{table}"
        for (r, table), path in zip(views, files)
    ]
    return _markdown("\n\n".join(parts))


def bench_plot(slug: str, **filters):
    """The results plot of a chapter on each GPU measured (``sweep=``, ``mode=``, ``dtype=``)."""
    from IPython.display import HTML

    views = _views("plot", slug, filters)
    if not views:
        return _not_measured(slug)
    return HTML("".join(plot for _, plot in views))
