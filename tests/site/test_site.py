"""The built site, opened page by page in a real browser.

Builds the site once (``mkdocs build --strict``: any warning fails), serves it
on 127.0.0.1 and visits every page with a system Chromium through Playwright.
On every page:

* no request leaves 127.0.0.1 (no CDN, no fonts, no analytics) and no local
  request fails;
* no console error and no uncaught page error;
* KaTeX rendered every formula (each ``.arithmatex`` holds a ``.katex``) and
  none failed (``.katex-error``), and no TeX is left raw in notebook markdown;
* every code-annotation marker in the code became a rendered annotation, and
  math inside annotation tooltips (inserted when opened) is rendered too.

The pages are visited once for the whole suite by the ``page_reports``
fixture (``academy/site/pytest_site.py``); ``tests/test_site_a11y.py`` asserts the
accessibility facts of the same visit and takes the screenshots,
``tests/test_site_weight.py`` the page weight and build time,
``tests/test_site_search.py`` the search.

The browser is a system Chromium (``find_chromium`` in ``academy/site/pytest_site.py``:
``$ACADEMY_CHROMIUM``, else one on ``PATH``, else Playwright's own; ``make test``
installs Debian's ``chromium`` when none is found). If there is none the test fails,
unless ``ACADEMY_SKIP_BROWSER=1`` says to skip the browser part.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from academy.site.pytest_site import PAGE_FACTS, summarize

import pytest

pytestmark = pytest.mark.slow

# Fixtures (site_build, site_dir, base_url, browser, page_reports, screenshot_dir)
# live in academy/site/pytest_site.py, registered by the root conftest.py, so that
# every tests/test_site*.py file shares one build, one browser and one visit
# of every page.


def test_every_page(page_reports):
    """Math rendered (annotations and notebook pages included), no other host, no console error."""
    report = summarize(page_reports, ("render", "network", "console"))
    assert not report, report


def test_page_facts_see_raw_tex_headings_and_missing_alt(browser):
    """The in-page script of the per-page checks catches what it must (so those checks can fail)."""
    page = browser.new_page()
    page.set_content(
        '<div class="md-content"><article><h1>T</h1><h3>skipped</h3>'
        '<div class="jp-RenderedMarkdown"><p>raw $x^2$ here</p><p><code>$not math$</code></p></div>'
        '<img src="a.png"><img src="b.png" alt="a plot"><svg role="img"></svg>'
        '<div style="width:300px;overflow-x:auto"><table style="width:500px"><tr><th>wide</th></tr></table></div>'
        # Material's markup: the scrolling wrapper, and inside it 20 px of padding before the table.
        '<div class="md-typeset__scrollwrap" style="width:300px;overflow-x:auto">'
        '<div class="md-typeset__table" style="display:inline-block;padding:0 20px">'
        '<table style="width:290px"><tr><th>padded</th></tr></table></div></div>'
        '<div style="width:300px"><table><tr><th>narrow</th></tr></table></div></article></div>'
    )
    facts = page.evaluate(PAGE_FACTS)
    page.close()
    assert facts["wideTables"] == ["wide: 500 px in 300 px", "padded: 290 px in 280 px"]
    assert facts["rawTex"] == ["raw $x^2$ here"]
    assert facts["headings"] == [[1, "T"], [3, "skipped"]]
    assert facts["images"] == ["a.png"] and len(facts["svgs"]) == 1


# ---------------------------------------------------------------- links (no browser)


class _Links(__import__("html.parser").parser.HTMLParser):
    """Collects every href and every element id of one page."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(errors="replace"))
    return parser


def test_internal_links_and_anchors_resolve(site_dir):
    """MkDocs validates links in Markdown pages, but not in notebook pages,
    whose markdown cells it never sees: check every page's links in the
    built site, anchors included."""
    pages = {index: _parse(index) for index in site_dir.rglob("index.html")}
    problems = []
    for index, links in pages.items():
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            target = (index.parent / parts.path).resolve() if parts.path else index
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{index.relative_to(site_dir)}: {href} (no such file)")
            elif parts.fragment and target in pages and parts.fragment not in pages[target].ids:
                problems.append(f"{index.relative_to(site_dir)}: {href} (no such anchor)")
    assert not problems, "broken links:\n  " + "\n  ".join(sorted(set(problems)))
