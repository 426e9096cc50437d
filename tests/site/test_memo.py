"""The remembered build steps (`academy.site.memo`): the same output as the step itself, reused only for the same input.

Each stand-in is compared with the library's own step, and a planted MkDocs
site is built twice in one process, as ``mkdocs serve`` does, to show that an
unchanged page is not converted again while an edited one is, and that a
reused page keeps its warnings and its anchors.
"""

from __future__ import annotations

import logging
import re

from academy.site import memo

import pytest


@pytest.fixture(autouse=True)
def fresh_store(monkeypatch):
    monkeypatch.setattr(memo, "STORE", {})
    yield
    memo.install(on=False)


def test_remember_computes_once_and_logs_the_warnings_again(caplog):
    calls = []

    def step():
        calls.append(1)
        logging.getLogger("mkdocs.plugins.academy").warning("a warning --strict counts")
        return "out"

    with caplog.at_level(logging.WARNING, logger="mkdocs"):
        assert memo.remember("step", "input", step) == "out"
        assert memo.remember("step", "input", step) == "out"
        assert memo.remember("step", "other input", step) == "out"
    assert len(calls) == 2
    assert sum("a warning --strict counts" in r.message for r in caplog.records) == 3


def test_an_exception_is_not_remembered():
    def failing():
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError):
            memo.remember("step", "input", failing)
    assert not memo.STORE["step"]


PAGE_HTML = """<h1 id="title">Title</h1><p>Intro <code>sm_scale</code>.</p>
<h2 id="part">Part</h2><p>Text</p><pre><code>x = 1</code></pre><h2 id="empty"></h2>"""


def sections(parser_class, html):
    parser = parser_class()
    parser.feed(html)
    parser.close()
    return [(s.el.tag, s.id, list(s.title), list(s.text)) for s in parser.data]


def test_the_search_parser_gives_materials_sections_and_parses_a_page_once(monkeypatch):
    from material.plugins.search import plugin

    original = plugin.Parser
    memo.install()
    assert plugin.Parser is not original and plugin.Parser.__wrapped__ is original
    assert sections(plugin.Parser, PAGE_HTML) == sections(original, PAGE_HTML)
    fed = []
    monkeypatch.setattr(original, "feed", lambda self, data: fed.append(data))
    first = plugin.Parser()
    first.feed(PAGE_HTML)
    first.close()
    first.data[0].title = ["changed by Material"]  # what create_entry_for_section may do
    assert sections(plugin.Parser, PAGE_HTML)[0][2] != ["changed by Material"]
    assert not fed  # never parsed again
    memo.install(on=False)
    assert plugin.Parser is original


def test_highlight_is_pygments_and_tells_options_apart():
    import pygments
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = "def f(x):\n    return x + 1\n"
    plain, spans = HtmlFormatter(), HtmlFormatter(linespans="__span")
    assert memo.highlight(code, PythonLexer(), plain) == pygments.highlight(code, PythonLexer(), plain)
    assert memo.highlight(code, PythonLexer(), spans) == pygments.highlight(code, PythonLexer(), spans)
    assert memo.highlight(code, PythonLexer(), plain) != memo.highlight(code, PythonLexer(), spans)
    assert len(memo.STORE["pygments-highlight"]) == 2


def test_world_holds_code_data_and_page_names_not_page_text(tmp_path):
    for name, text in {
        "academy/site/x.py": "A = 1\n",
        "examples/op/results/h100.json": "{}\n",
        "tests/op/test_op.py": "",
        "mkdocs.yml": "site_name: x\n",
        "docs/index.md": "# Home\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = memo.world(tmp_path)
    (tmp_path / "docs/index.md").write_text("# Home, edited\n")
    assert memo.world(tmp_path) == before  # a page's text is in its own key
    for name in ("examples/op/results/h100.json", "academy/site/x.py", "mkdocs.yml"):
        (tmp_path / name).write_text((tmp_path / name).read_text() + " ")
        assert memo.world(tmp_path) != before
        before = memo.world(tmp_path)
    (tmp_path / "docs/new.md").write_text("# New\n")
    assert memo.world(tmp_path) != before


# ---------------------------------------------------------------- a planted site, built twice in one process

MKDOCS_YML = """\
site_name: planted
validation:
  anchors: warn
nav:
  - Home: index.md
  - Other: other.md
markdown_extensions:
  - toc:
      permalink: true
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A planted site; MkDocs' ``Page.render`` counts the pages it converts (``site.converted``)."""
    from mkdocs.structure.pages import Page

    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(MKDOCS_YML)
    (tmp_path / "docs/index.md").write_text("# Home\n\nSee [the part](other.md#part) and [nowhere](missing.md).\n")
    (tmp_path / "docs/other.md").write_text("# Other\n\n## Part\n\nText.\n")
    converted, original = [], Page.render

    def counting(page, config, files):
        converted.append(page.file.src_uri)
        return original(page, config, files)

    monkeypatch.setattr(Page, "render", counting)  # what the memo wraps
    return tmp_path, converted


def build(site, caplog):
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    root, converted = site
    config = load_config(str(root / "mkdocs.yml"), site_dir=str(root / "site"))
    memo.install(world_hash="planted")
    converted.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mkdocs"):
        mkdocs_build(config)
    pages = {name: (root / "site" / name / "index.html").read_text() for name in ("", "other")}
    html = {name: re.sub(r"Build Date UTC : .*", "", text) for name, text in pages.items()}  # the theme dates it
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return list(converted), html, warnings


def test_a_rebuild_converts_only_the_edited_page_and_keeps_warnings_and_anchors(site, caplog):
    converted, first, warnings = build(site, caplog)
    assert sorted(converted) == ["index.md", "other.md"]
    assert any("missing.md" in w for w in warnings)

    converted, second, warnings = build(site, caplog)
    assert converted == []
    assert second == first
    assert any("missing.md" in w for w in warnings)  # the reused page still warns

    (site[0] / "docs/other.md").write_text("# Other\n\n## Renamed\n\nText.\n")
    converted, third, warnings = build(site, caplog)
    assert converted == ["other.md"]
    assert 'id="renamed"' in third["other"]
    # index.md was reused, and its link to other.md#part is checked against this build's other.md
    assert any("#part" in w for w in warnings), warnings


def test_a_page_with_a_mkdocstrings_block_is_always_converted():
    class Stub:
        markdown = "# API\n\n::: academy.site.memo\n"

    assert memo._render_key(Stub(), None, [], "w") is None


def test_a_reused_page_registers_its_anchors_with_autorefs_again(site, caplog):
    """A cross-reference to an anchor of a page that was not converted again still resolves."""
    root, converted = site
    (root / "mkdocs.yml").write_text(MKDOCS_YML + "  - attr_list\nplugins:\n  - autorefs\n")
    (root / "docs/other.md").write_text("# Other\n\n[](){#an-alias}\n\n## Part\n\nText.\n")
    (root / "docs/index.md").write_text("# Home\n\nSee [the part][an-alias].\n")
    build(site, caplog)
    (root / "docs/index.md").write_text("# Home\n\nSee [the part][an-alias], again.\n")
    converted, html, warnings = build(site, caplog)
    assert converted == ["index.md"]
    assert 'class="autorefs autorefs-internal" title="Part" href="other/#part"' in html[""]
    assert not [w for w in warnings if "an-alias" in w], warnings
