"""The search index rewrite (`academy.site.search_index`), on small pages: no build needed.

The real engine on the real index is ``tests/site/test_site_search.py``.
"""

from __future__ import annotations

import json
import re

from academy.site import search_index

NOTEBOOK = """<html><body><article class="md-content__inner md-typeset">
<div class="jp-Notebook">
<div class="jp-Cell jp-MarkdownCell"><div class="jp-RenderedMarkdown">
<h1 id="title">Title<a class="anchor-link" href="#title">¶</a></h1>
<p>The introduction.</p>
<h2 id="first-section">First section<a class="anchor-link" href="#first-section">¶</a></h2>
<p>Before the code.</p>
</div></div>
<div class="jp-Cell jp-CodeCell"><div class="jp-InputArea">
<div class="jp-InputPrompt">In [1]:</div>
<div class="highlight-ipynb"><pre><span class="n">y</span> = <span class="n">kernel</span>(x, num_warps=4)</pre></div>
<div class="clipboard-copy-txt">y = kernel(x, num_warps=4)</div>
</div>
<div class="jp-OutputArea"><div class="jp-OutputPrompt">Out[1]:</div>
<div class="jp-RenderedText"><pre>0.123 ms</pre></div>
<div class="jp-RenderedMarkdown"><p>A table the cell displays.</p><pre>a listing shown by show()</pre></div>
</div></div>
<div class="jp-Cell jp-MarkdownCell"><div class="jp-RenderedMarkdown">
<p>After the code, still the first section.</p>
<p data-search-exclude>Not for search.</p>
<h2 id="second">Second<a class="anchor-link" href="#second">¶</a></h2><p>More.</p>
</div></div>
</div></article></body></html>"""


def test_notebook_sections_hold_all_their_text():
    entries = search_index.notebook_entries("tutorials/t/", "Title", NOTEBOOK)
    assert [e["location"] for e in entries] == ["tutorials/t/", "tutorials/t/#first-section", "tutorials/t/#second"]
    page, first, second = entries
    assert page["title"] == "Title" and "The introduction." in page["text"]
    assert first["title"] == "First section" and second["text"] == "<p>More.</p>"
    text = first["text"]
    kept = ("Before the code.", "y = kernel(x, num_warps=4)", "A table the cell displays.", "still the first section")
    for phrase in kept:
        assert phrase in text, phrase
    for dropped in ("In [1]", "Out[1]", "0.123 ms", "a listing", "¶", "Not for search"):
        assert dropped not in text, dropped
    assert text.count("num_warps") == 1 and "<pre>" not in text


def test_stop_words_and_lone_letters_are_separators():
    separator = search_index.stop_word_separator(r"[\s\-]+", ["a", "is", "what"])
    assert search_index.stop_word_separator(separator, ["a", "is", "what"]) == separator

    def tokens(text):
        return [t for t in re.split(separator, text) if t]

    assert tokens("What is a warp") == ["warp"]
    assert tokens("split-K small M") == ["split", "small"]
    assert tokens("is_hip num_warps A100 analysis") == ["is_hip", "num_warps", "A100", "analysis"]


def test_rewrite_drops_listings_and_reindexes_notebooks(tmp_path):
    (tmp_path / "search").mkdir()
    (tmp_path / "tutorials" / "t").mkdir(parents=True)
    (tmp_path / "tutorials" / "t" / "index.html").write_text(NOTEBOOK)
    (tmp_path / "assets" / "javascripts" / "workers").mkdir(parents=True)
    (tmp_path / "assets" / "javascripts" / "workers" / "search.x.min.js").write_text(
        'e.stopWordFilter=e.generateStopWordFilter(["a","is"])'
    )
    docs = [
        {"location": "kernels/k/", "title": "K", "text": "<p>Prose.</p><pre>listing</pre>"},
        {"location": "tutorials/t/", "title": "Title", "text": "everything"},
        {"location": "tutorials/t/#title", "title": "Title", "text": "the h1 again"},
        {"location": "tutorials/t/#first-section", "title": "First section", "text": "cut at the first cell"},
    ]
    fields = {"title": {"boost": 20}, "text": {"boost": 1}}
    index = {"config": {"separator": r"[\s\-]+", "fields": fields}, "docs": docs}
    (tmp_path / "search" / "search_index.json").write_text(json.dumps(index))
    search_index.rewrite(tmp_path)
    out = json.loads((tmp_path / "search" / "search_index.json").read_text())
    assert out["config"]["separator"].endswith(r"|\b(?:[A-Za-z]|[Ii]s|[Aa])\b")
    assert [d["location"] for d in out["docs"]] == [
        "kernels/k/",
        "tutorials/t/",
        "tutorials/t/#first-section",
        "tutorials/t/#second",
    ]
    assert out["docs"][0]["text"] == "<p>Prose.</p>"
    # Sections carry their page's title in a field of its own; introductions count less.
    assert out["config"]["fields"]["page"] == {"boost": search_index.PAGE_BOOST}
    assert [d.get("page") for d in out["docs"]] == [None, None, "Title", "Title"]
    assert [d.get("boost") for d in out["docs"]] == [search_index.INTRO_BOOST] * 2 + [None] * 2
