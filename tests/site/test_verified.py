"""Verified-with records: the pytest plugin that writes them and the badge the pages show."""

from __future__ import annotations

import json

from academy import chapters
from academy.bench import results as _results  # noqa: F401
from academy.site import verified

import pytest
import torch  # noqa: F401
import triton  # noqa: F401  (imported here, before pytester: see run_plugin)

pytest_plugins = ["pytester"]


@pytest.fixture
def fake_repo(tmp_path, monkeypatch):
    """examples/toy (kernel.py) and tests/ in a temporary folder."""
    examples, tests = tmp_path / "examples", tmp_path / "tests"
    (examples / "toy").mkdir(parents=True)
    (examples / "toy" / "kernel.py").write_text("X = 1\n")
    tests.mkdir()
    monkeypatch.setattr(chapters, "EXAMPLES_DIR", examples)
    monkeypatch.setattr(chapters, "TESTS_DIR", tests)
    return tmp_path


def test_a_chapters_tests_are_its_folder_and_nothing_else(fake_repo):
    tests = fake_repo / "tests"
    for path in ("toy/test_kernel.py", "toy/deep/test_more.py", "toy/helpers.py", "toy_two/test_kernel.py"):
        (tests / path).parent.mkdir(parents=True, exist_ok=True)
        (tests / path).write_text("from examples.toy.kernel import X\n")
    (tests / "test_toy.py").write_text("")  # a flat file named after the chapter no longer counts
    assert [p.relative_to(tests).as_posix() for p in verified.test_files_of("toy")] == [
        "toy/deep/test_more.py",
        "toy/test_kernel.py",
    ]


def test_fast_path_requirement_is_read_from_the_code(fake_repo):
    assert verified.fast_path_requirement("toy") is None
    (fake_repo / "examples/toy/kernel.py").write_text('FAST_PATH_REQUIRES = (9, 0)\nFAST_PATH_REASON = "TMA"\n')
    assert verified.fast_path_requirement("toy") == ((9, 0), "TMA")
    assert "fast path needs sm_90 (TMA)" in verified.badge("toy")
    (fake_repo / "examples/toy/kernel.py").write_text("FAST_PATH_REQUIRES = 9\n")
    with pytest.raises(ValueError, match="major, minor"):
        verified.fast_path_requirement("toy")


def record(slug="toy", key="cpu", code_hash=None, **kw):
    base = dict(
        slug=slug,
        key=key,
        platform="cpu-interpreter" if key == "cpu" else "NVIDIA H100 80GB HBM3",
        capability=None if key == "cpu" else "sm_90",
        torch="2.13.0",
        triton="3.9.0",
        python="3.11.7",
        date="2026-11-22T05:00:00Z",
        code_hash=code_hash or chapters.Chapter(slug).code_hash(),
        passed=3,
        skipped=1,
    )
    return verified.Record(**{**base, **kw})


def test_badge_states_versions_platforms_and_staleness(fake_repo):
    assert "not yet verified" in verified.badge("toy")
    assert "any CUDA GPU Triton supports" in verified.badge("toy")
    verified.save(record())
    text = verified.badge("toy")
    assert "CPU interpreter — torch 2.13.0, triton 3.9.0 (2026-11-22)" in text
    assert "not yet verified on a GPU" in text and "stale" not in text
    verified.save(record(key="h100", torch="2.11.0", triton="3.6.0", code_hash="0ld"))
    text = verified.badge("toy")
    assert "H100 (sm_90) — torch 2.11.0, triton 3.6.0" in text
    assert text.index("CPU interpreter") < text.index("H100")
    assert "stale" in text and "not yet verified on a GPU" not in text


def test_badge_goes_right_under_the_title(fake_repo):
    from academy.site.pages import insert_badge

    html = '<pre><code># &lt;/h1&gt;</code></pre>\n<div><h1 id="toy">Toy</h1>\n<p>Text.</p></div>'
    lines = insert_badge(html, "toy").split("\n")
    assert lines[1] == '<div><h1 id="toy">Toy</h1>'
    assert lines[2].startswith('<p class="academy-verified" data-search-exclude>')
    assert lines[3:] == ["", "<p>Text.</p></div>"]
    assert insert_badge("<p>No title.</p>", "toy") == "<p>No title.</p>"


TOY_TESTS = """
import pytest

def test_one():
    assert True

@pytest.mark.skip(reason="gpu only")
def test_gpu():
    pass

def test_two():
    assert {ok}
"""


def run_plugin(pytester, fake_repo, monkeypatch, ok=True, args=()):
    # runpytest_inprocess removes afterwards every module the inner run imported;
    # the plugin imports torch and triton when it writes a record, and a second
    # import of triton's C extension later in this process aborts it. So both are
    # imported at the top of this file, before any inner run.
    monkeypatch.setenv("ACADEMY_RECORD_VERIFIED", "1")
    test_file = fake_repo / "tests" / "toy" / "test_toy.py"
    test_file.parent.mkdir(exist_ok=True)
    test_file.write_text(TOY_TESTS.format(ok=ok))
    return pytester.runpytest_inprocess("-p", "academy.site.pytest_verified", "-o", "addopts=", str(test_file), *args)


def test_plugin_records_a_chapter_whose_tests_all_passed(pytester, fake_repo, monkeypatch):
    result = run_plugin(pytester, fake_repo, monkeypatch)
    result.assert_outcomes(passed=2, skipped=1)
    data = json.loads((fake_repo / "examples/toy/verified/cpu.json").read_text())
    assert data["passed"] == 2 and data["skipped"] == 1 and data["platform"] == "cpu-interpreter"
    assert data["code_hash"] == chapters.Chapter("toy").code_hash() and data["test_files"] == ["test_toy.py"]


@pytest.mark.parametrize("ok, args", [(False, ()), (True, ("-k", "one"))])
def test_plugin_records_nothing_after_a_failure_or_a_partial_run(pytester, fake_repo, monkeypatch, ok, args):
    run_plugin(pytester, fake_repo, monkeypatch, ok=ok, args=args)
    assert not (fake_repo / "examples/toy/verified").exists()


def page(src_path):
    return type("Page", (), {"file": type("File", (), {"src_path": src_path})()})()


def test_hook_directive_and_automatic_badge():
    from academy.site import hooks, pages

    text = pages.Build().render(pages.parse_directive("verified vector_add"))
    assert text.startswith('<p class="academy-verified" data-search-exclude>')

    html = '<h1 id="title">Title</h1>\n<p>Text.</p>'
    for chapter_page in ("kernels/vector_add.md", "tutorials/row_sum.py"):  # a Markdown page, a notebook
        out = hooks.on_page_content(html, page=page(chapter_page))
        assert out.split("\n")[1].startswith('<p class="academy-verified" data-search-exclude>'), chapter_page
        assert hooks.on_page_content(out, page=page(chapter_page)) == out  # once, and never beside the directive's
    assert hooks.on_page_content(html, page=page("tutorials/why_triton.py")) == html  # no chapter's page
