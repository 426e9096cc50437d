"""The pages and the MkDocs hook over them: directive parsing, expansion, chapters with and without results.

Chapters here are fixtures written to a temporary examples/ folder; no published numbers.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import types
from pathlib import Path

from academy import chapters
from academy.bench.results import save
from academy.site import hooks, pages, reloading
from academy.site.pages import Directive, DirectiveError, expand, parse_directive

import pytest

from tests.results_fixtures import make_results, make_row

# --------------------------------------------------------------------------- parsing


def test_parse_value_is_everything_after_first_equals():
    d = parse_directive(" table fused_softmax sweep=M=8192 mode=fwd+bwd dtype=bfloat16 ")
    assert d == Directive("table", "fused_softmax", {"sweep": "M=8192", "mode": "fwd+bwd", "dtype": "bfloat16"})


def test_parse_quoted_value_and_bare_directives():
    assert parse_directive('plot x sweep="M=8192, D=128"').options == {"sweep": "M=8192, D=128"}
    assert parse_directive("overview") == Directive("overview")
    assert parse_directive("summary rms_norm") == Directive("summary", "rms_norm")


@pytest.mark.parametrize(
    "body, message",
    [
        ("tabel x", "unknown directive bench:tabel"),
        ("table x colour=red", "unknown key 'colour'"),
        ("table x mode=fwd mode=fwd", "given twice"),
        ("table x mode=", "no value"),
        ("table", "exactly one chapter slug"),
        ("table a b", "exactly one chapter slug"),
        ("summary x mode=fwd", "takes no options"),
        ("overview x", "takes no slug"),
        ("", "empty"),
    ],
)
def test_parse_errors(body, message):
    with pytest.raises(DirectiveError, match=message):
        parse_directive(body)


# --------------------------------------------------------------------------- expansion


def echo(d: Directive) -> str:
    return f"[{d.name}:{d.slug}:{sorted(d.options.items())}]\nsecond line"


def test_expand_replaces_whole_line_directives_keeping_indent():
    page = "# Title\n\n<!-- bench:table a sweep=M=8192 -->\n\n!!! note\n    <!-- bench:overview -->\n"
    out = expand(page, echo)
    assert "[table:a:[('sweep', 'M=8192')]]\nsecond line" in out
    assert "    [overview:None:[]]\n    second line" in out
    assert "<!--" not in out


def test_expand_leaves_code_fences_and_inline_mentions_alone():
    page = "```markdown\n<!-- bench:tabel x -->\n```\n\nUse `<!-- bench:table SLUG -->` to show a table.\n"
    assert expand(page, echo) == page


def test_expand_unknown_directive_raises_with_line_number():
    with pytest.raises(DirectiveError, match=r"line 3: unknown directive bench:tabel"):
        expand("a\n\n<!-- bench:tabel x -->\n", echo)


def test_hook_turns_errors_into_build_errors():
    from mkdocs.exceptions import BuildError

    with pytest.raises(BuildError, match="unknown directive"):
        hooks.on_page_markdown("<!-- bench:nope -->\n", page=None)


# --------------------------------------------------------------------------- chapters on disk


@pytest.fixture
def examples(tmp_path, monkeypatch):
    """A temporary examples/ with a chapter `fixture_op` (no results yet) and its bench spec."""
    root = tmp_path / "examples"
    package = root / "fixture_op"
    package.mkdir(parents=True)
    (package / "kernel.py").write_text("def op(x):\n    return x\n")
    monkeypatch.setattr(chapters, "EXAMPLES_DIR", root)
    module = type(sys)("examples.fixture_op.bench")
    module.SPEC = type("Spec", (), {"headline": (("fwd", {"M": 8192, "N": 1024}, "bfloat16"),)})()
    monkeypatch.setitem(sys.modules, "examples.fixture_op.bench", module)
    return package


def current_hash(package):
    return chapters.code_hash((package / "kernel.py").read_text())


def test_no_results_renders_a_note(examples):
    out = expand("<!-- bench:table fixture_op -->", pages.Build().render)
    assert out.startswith('!!! note "Not measured yet"') and "academy bench fixture_op" in out


def test_unknown_slug_raises(examples):
    with pytest.raises(DirectiveError, match="no chapter 'nope'"):
        expand("<!-- bench:table nope -->", pages.Build().render)


def test_bad_filter_value_raises(examples):
    save(make_results([make_row("academy", 1024, 1.0)], kernel_hash=current_hash(examples)), examples / "results")
    with pytest.raises(DirectiveError, match="mode='bwd'"):
        expand("<!-- bench:table fixture_op mode=bwd -->", pages.Build().render)


def test_one_gpu_no_tabs_several_gpus_tabs(examples):
    save(make_results([make_row("academy", 1024, 1.0), make_row("eager", 1024, 2.0)]), examples / "results")
    one = expand("<!-- bench:summary fixture_op -->", pages.Build().render)
    assert "===" not in one and "**2.00×**" in one
    save(make_results([make_row("academy", 1024, 1.0)], gpu="NVIDIA H200"), examples / "results")
    both = expand("<!-- bench:table fixture_op sweep=M=8192 -->", pages.Build().render)
    assert '=== "H100"' in both and '=== "H200"' in both
    assert both.index('=== "H100"') < both.index('=== "H200"')
    assert "\n    | M×<wbr>N |" in both  # tab content is indented


def test_stale_results_logged_and_warned(examples, caplog):
    save(make_results([make_row("academy", 1024, 1.0)], kernel_hash="old"), examples / "results")
    with caplog.at_level(logging.INFO, logger="mkdocs.plugins.academy"):
        out = expand("<!-- bench:provenance fixture_op -->", pages.Build().render)
    assert out.startswith("!!! warning")
    assert any("stale results" in r.message and r.levelno == logging.INFO for r in caplog.records)


def test_fresh_results_no_warning(examples, caplog):
    save(make_results([make_row("academy", 1024, 1.0)], kernel_hash=current_hash(examples)), examples / "results")
    with caplog.at_level(logging.INFO, logger="mkdocs.plugins.academy"):
        out = expand("<!-- bench:provenance fixture_op -->", pages.Build().render)
    assert out.startswith("??? info") and "!!! warning" not in out
    assert not caplog.records


def test_overview_lists_chapters_with_results(examples):
    assert expand("<!-- bench:overview -->", pages.Build().render).startswith("!!! note")
    save(make_results([make_row("academy", 1024, 1.0), make_row("eager", 1024, 3.0)]), examples / "results")
    out = expand("<!-- bench:overview -->", pages.Build().render)
    assert "[Fixture op](kernels/fixture_op.md)" in out and "3.00×" in out


def test_not_measured_note_once_per_page(examples):
    page = "<!-- bench:summary fixture_op -->\n\n<!-- bench:table fixture_op -->\n\n<!-- bench:plot fixture_op -->\n"
    out = hooks.on_page_markdown(page, page=None)
    assert out.count("Not measured yet") == 1


def test_memory_directive_renders_peaks(examples):
    rows = [
        dataclasses.replace(make_row(p, 1024, 1.0), peak_mib=mib) for p, mib in (("academy", 10.0), ("eager", 30.0))
    ]
    save(make_results(rows, kernel_hash=current_hash(examples)), examples / "results")
    out = expand("<!-- bench:memory fixture_op mode=fwd -->", pages.Build().render)
    assert "| 8192×<wbr>1024 | 10.0 | 30.0 <small>3.00×</small> |" in out and "ours<br><small>MiB</small>" in out


# --------------------------------------------------------------------------- the hook and the build's state


def test_the_hook_is_a_thin_adapter_without_module_state():
    assert len(Path(hooks.__file__).read_text().splitlines()) <= 150
    for name, value in vars(hooks).items():
        if name.startswith("__") or name == "annotations":
            continue
        assert isinstance(value, (types.ModuleType, types.FunctionType, type, str)), f"hooks.{name} is module state"


def test_on_config_makes_one_build_whose_state_lasts_the_build(examples, monkeypatch, caplog):
    reloads = []
    monkeypatch.setattr(reloading, "reload_modules", lambda: reloads.append(True))  # reloading: test_imports.py
    save(make_results([make_row("academy", 1024, 1.0)], kernel_hash="old"), examples / "results")
    config = {"nav": [{"Kernels": [{"Fixture op": "kernels/fixture_op.md"}]}]}
    with caplog.at_level(logging.INFO, logger="mkdocs.plugins.academy"):
        for _ in range(2):  # two builds, two pages each: the stale file is logged once per build
            hooks.on_config(config)
            assert config[hooks.BUILD_KEY].nav_titles == {"fixture_op": "Fixture op"}
            for _ in range(2):
                hooks.on_page_markdown("<!-- bench:provenance fixture_op -->", page=None, config=config)
    assert reloads == [True, True]
    assert sum("stale results" in r.message for r in caplog.records) == 2


def test_a_sweep_only_one_gpu_measured_is_drawn_from_that_gpu_and_a_misspelt_one_fails():
    from academy.site.pages import _measuring_the_sweep

    h100 = make_results([make_row("academy", 1024, 1.0)], gpu="NVIDIA H100 80GB HBM3")
    h200 = make_results([make_row("academy", 1024, 1.0, sweep="models")], gpu="NVIDIA H200")
    assert _measuring_the_sweep([h100, h200], "models") == [h200]
    assert _measuring_the_sweep([h100, h200], None) == [h100, h200]
    assert _measuring_the_sweep([h100, h200], "modles") == [h100, h200]  # none has it: each raises when drawn
