"""The search index: listings out of Markdown pages, notebook pages indexed per section.

Two rewrites of Material's ``search/search_index.json``, after the build:

* **Listings out.** Material's search worker downloads the whole index with
  the first page a reader opens, and the listings of kernel source were about
  40% of it: the landing page's weight grew with every chapter towards the
  1.5 MB bar (``tests/site/test_site_weight.py``). Every ``<pre>`` block of a
  Markdown page is dropped; prose, headings and inline code stay searchable,
  and the listings are on the pages and in ``examples/``.
* **Notebook pages per section.** Material splits a page into sections at its
  headings, but a heading nested in a notebook cell's ``<div>`` ends its
  section with that cell: each section of a tutorial (mkdocs-jupyter) stopped
  at its first code cell, about two thirds of a tutorial's text landed in the
  page's own entry, and a hit opened the page at its top.
  [`notebook_entries`][academy.site.search_index.notebook_entries] reads the built page again in document order and
  gives each heading all the text up to the next heading: its markdown cells,
  the source of its code cells, and what they display as Markdown or HTML
  (tables, answers), but not printed output, images or the listings that
  ``show`` displays (the same listings the Markdown pages leave out).

* **Stop words out of queries.** Material's search box appends ``*`` to every
  word typed, and lunr skips its stop-word filter for a word with a wildcard:
  "what is a warp" searched for every indexed word beginning with "a", "is"
  or "what" (``int4``, ``is_hip``, ``attention``...), so plain-English
  questions found whatever page had most such words.
  [`stop_word_separator`][academy.site.search_index.stop_word_separator]
  makes lunr's own English stop words (and lone letters) separators, so a
  query drops them before the wildcard is added; the index loses nothing,
  since the same filter already kept the stop words out of it.

* **Sections weighed against their page.** A question names a page's topic
  ("...in a matmul") and a section's detail; Material indexes a section by its
  own heading and text only, while the page's own entry (its introduction)
  holds the page title at the title's weight, so introductions outranked the
  answering section. Each section gets its page's title in a ``page`` field
  (`PAGE_BOOST`), and each introduction counts `INTRO_BOOST`.

The reader-question test, ``tests/site/test_site_search.py``, runs the real
search engine on this index.
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.academy")

# A section's page title, as a field of its own: "the TF32 trap" belongs to "Tiled matmul",
# and a reader who asks about a matmul names the page's topic, not the heading's. Weighed
# well below the section's own title (Material's boost: 20), above its text (1); not shown.
PAGE_FIELD = "page"
PAGE_BOOST = 10
# A page's own entry is its introduction, and it holds the page's title: it matched every
# question that named the topic, above the section that answers it. Material's worker
# weighs each entry by its "boost"; an introduction counts half.
INTRO_BOOST = 0.5

PRE_RE = re.compile(r"<pre>.*?</pre>", re.S)
WHITESPACE_RE = re.compile(r"\s+")
HEADINGS = {f"h{n}" for n in range(1, 7)}
# Tags Material's own indexer keeps as markup in a section's text (material/plugins/search/plugin.py).
KEPT = {"p", "code", "li", "ol", "ul", "sub", "sup"}
# Whole subtrees that are not a reader's text.
SKIPPED_TAGS = {"script", "style", "svg", "button", "clipboard-copy", "img", "template", "noscript"}
SKIPPED_CLASSES = {
    "jp-InputPrompt",  # In [3]:
    "jp-OutputPrompt",  # Out[3]:
    "clipboard-copy-txt",  # a second copy of each code cell's source, for the copy button
    "zeroclipboard-container",
    "anchor-link",  # the heading's ¶
    "headerlink",
    "jp-RenderedText",  # printed output: numbers, not prose
    "jp-RenderedImage",
    "jp-RenderedSVG",
    "jp-RenderedLatex",
}
VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input",
    "link", "meta", "param", "source", "track", "wbr",
}  # fmt: skip
# lunr's English stop words, as the search worker Material ships builds its filter from them.
STOP_WORDS_RE = re.compile(r"generateStopWordFilter\((\[[^\]]*\])\)")
ARTICLE_OPEN = '<article class="md-content__inner md-typeset">'
NOTEBOOK_MARK = 'class="jp-Notebook'


class _Sections(HTMLParser):
    """Splits a page's HTML at every heading with an id, whatever the nesting, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[dict] = [{"id": None, "level": 0, "title": [], "text": []}]
        self.stack: list[tuple[str, bool, bool, bool]] = []  # tag, skipped, in a heading, in a code cell's source
        self.skipping = 0

    def _in(self, index: int) -> bool:
        return bool(self.stack) and self.stack[-1][index]

    def _out(self) -> list[str]:
        return self.sections[-1]["title" if self._in(2) else "text"]

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        in_heading = self._in(2)
        in_source = self._in(3) or "jp-InputArea" in classes
        skip = tag in SKIPPED_TAGS or bool(classes & SKIPPED_CLASSES) or "data-search-exclude" in attrs
        # Listings a code cell displays (``show``) are left out, as on the Markdown pages; its own source stays.
        if tag == "pre" and not in_source:
            skip = True
        if skip:
            self.skipping += 1
        elif not self.skipping and tag in HEADINGS and attrs.get("id"):
            self.sections.append({"id": attrs["id"], "level": int(tag[1]), "title": [], "text": []})
            in_heading = True
        elif not self.skipping:
            if tag == "pre":
                self._out().append("<p><code>")
            elif tag in KEPT:
                self._out().append(f"<{tag}>")
        self.stack.append((tag, skip, in_heading, in_source))

    def handle_endtag(self, tag):
        if tag in VOID or not any(t[0] == tag for t in self.stack):
            return
        while self.stack:
            open_tag, skip, _, _ = self.stack.pop()
            if skip:
                self.skipping -= 1
            elif not self.skipping:
                if open_tag == "pre":
                    self._out().append("</code></p>")
                elif open_tag in KEPT:
                    self._out().append(f"</{open_tag}>")
            if open_tag == tag:
                break

    def handle_data(self, data):
        if not self.skipping:
            self._out().append(html.escape(data, quote=False))


def _clean(parts: list[str]) -> str:
    text = "".join(parts)
    text = re.sub(r"<(p|li|ul|ol|code|sub|sup)>\s*</\1>", "", text)  # empty wrappers
    text = re.sub(r"[ \t]*\n\s*", "\n", text)
    return text.strip()


def article(page_html: str) -> str:
    """The page's content: Material's ``<article>``, without the header, navigation and footer."""
    start = page_html.find(ARTICLE_OPEN)
    end = page_html.rfind("</article>")
    return page_html[start:end] if 0 <= start < end else ""


def notebook_entries(location: str, title: str, page_html: str) -> list[dict]:
    """Search entries for a notebook page: the page's own entry (its text before the first section
    heading below the title), then one per heading with its full text, in page order."""
    parser = _Sections()
    parser.feed(article(page_html))
    parser.close()
    sections = parser.sections
    head, rest = sections[0], sections[1:]
    # The title (the first h1) belongs to the page's own entry, as Material indexes a Markdown page.
    if rest and rest[0]["level"] == 1:
        head = {"id": None, "title": rest[0]["title"], "text": head["text"] + rest[0]["text"]}
        rest = rest[1:]
    entries = [{"location": location, "title": title, "text": _clean(head["text"])}]
    for section in rest:
        entries.append(
            {
                "location": f"{location}#{section['id']}",
                "title": _clean(section["title"]),
                "text": _clean(section["text"]),
            }
        )
    return entries


def stop_words(site_dir: str | Path) -> list[str]:
    """lunr's stop words, read from the search worker script of the built site (empty if not found)."""
    for script in sorted((Path(site_dir) / "assets" / "javascripts" / "workers").glob("search*.js")):
        found = STOP_WORDS_RE.search(script.read_text(encoding="utf-8"))
        if found:
            return json.loads(found.group(1))
    return []


def stop_word_separator(separator: str, words: list[str]) -> str:
    """``separator`` that also matches each stop word, and each single letter, standing alone
    (capitalised or not).

    The search worker splits both the index text and each typed word with it
    (``lunr.tokenizer.separator``, no flags), so a stop word in a query leaves
    no term behind, while ``num_warps`` or ``A100`` keep their letters (no
    word boundary inside them). A lone letter goes too: "split-K small M"
    searched for every word beginning with "k" or "m", and an indexed "M" is
    found by no query that "m*" would not find anyway. Adding it twice changes
    nothing."""
    alternatives = "|".join(f"[{w[0].upper()}{w[0]}]{re.escape(w[1:])}" for w in sorted(words, key=len, reverse=True))
    extra = f"|\\b(?:[A-Za-z]|{alternatives})\\b"
    return separator if separator.endswith(extra) else separator + extra


def rewrite(site_dir: str | Path, entries: Callable[[str, str, str], list[dict]] = notebook_entries) -> None:
    """Rewrite ``search/search_index.json`` under a built site: stop words made separators
    (`stop_word_separator`), notebook pages re-indexed per section
    (``entries``, `notebook_entries` or one that remembers its results), every other page's
    ``<pre>`` blocks removed."""
    site_dir = Path(site_dir)
    path = site_dir / "search" / "search_index.json"
    if not path.is_file():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    words = stop_words(site_dir)
    if words:
        data["config"]["separator"] = stop_word_separator(data["config"]["separator"], words)
    else:
        log.warning("academy: no stop-word list in the built search worker; queries keep their stop words")
    docs, notebooks = [], set()
    for doc in data.get("docs", []):
        page, _, anchor = doc["location"].partition("#")
        if page in notebooks:
            continue  # replaced with the page's entry
        if not anchor:
            built = site_dir / page / "index.html"
            page_html = built.read_text(encoding="utf-8") if built.is_file() else ""
            if NOTEBOOK_MARK in page_html:
                notebooks.add(page)
                docs += [dict(entry) for entry in entries(page, doc["title"], page_html)]
                continue
        doc["text"] = PRE_RE.sub(" ", doc.get("text", ""))
        docs.append(doc)
    titles = {doc["location"]: doc["title"] for doc in docs if "#" not in doc["location"]}
    for doc in docs:  # runs of white space show as one space in a result anyway: 1% of the index
        doc["text"] = WHITESPACE_RE.sub(" ", doc["text"]).strip()
        page, _, anchor = doc["location"].partition("#")
        if anchor and page in titles:
            doc[PAGE_FIELD] = titles[page]
        elif not anchor:
            doc["boost"] = INTRO_BOOST
    data["config"]["fields"][PAGE_FIELD] = {"boost": PAGE_BOOST}
    data["docs"] = docs
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
