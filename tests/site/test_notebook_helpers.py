"""academy.site.notebook: what the tutorials use to show code and results."""

from academy.bench import render
from academy.site.notebook import answer, bench_table, section

import pytest


def test_section_returns_the_named_code_only():
    text = section("examples/vector_add/kernel.py:reference")
    assert text.startswith("def reference(") and "--8<--" not in text and "add_kernel" not in text


def test_missing_section_is_a_clear_error():
    with pytest.raises(ValueError, match="no section 'nope'"):
        section("examples/vector_add/kernel.py:nope")


def test_answer_is_collapsed():
    html = answer("examples/vector_add/kernel.py:reference").data
    assert html.startswith("<details") and "<summary>Answer</summary>" in html and "reference" in html


def test_bench_table_renders_committed_results():
    assert "| n | ours<br><small>" in bench_table("vector_add").data


def test_bench_table_fits_a_notebooks_narrower_column(monkeypatch):
    """A tutorial's output column is narrower than a page's: its tables are fitted to that."""
    widths = []
    drawn = render.table
    monkeypatch.setattr(render, "table", lambda *args, **kw: widths.append(kw["width_em"]) or drawn(*args, **kw))
    bench_table("vector_add")
    assert widths and set(widths) == {render.NOTEBOOK_TABLE_EM} and render.NOTEBOOK_TABLE_EM < render.TABLE_EM


def test_annotation_markers_are_dropped():
    text = section("examples/fused_softmax/kernel.py:forward_kernel")
    assert "# (1)!" not in text and "mask = in_rows & (cols[None, :] < body[:, None])" in text
