"""Prose may quote only measured numbers: the rule of academy.site.prose_numbers, and every finished kernel page."""

from __future__ import annotations

from academy.site import prose_numbers as pn

import pytest

from tests.results_fixtures import make_results, make_row


@pytest.fixture
def measured():
    # ours 1.0 ms, eager 2.0 ms, compile 1.5 ms at N=1024; rates from the fixture work model
    res = make_results([make_row("academy", 1024, 1.0), make_row("eager", 1024, 2.0), make_row("compile", 1024, 1.5)])
    return pn.measured_numbers([res], {"fixture_op": [("fwd", {"M": 8192, "N": 1024}, "bfloat16")]})


def quoted(md: str) -> list[str]:
    return [q.text for q in pn.find_quantities(md)]


def test_finds_measurement_like_quantities():
    md = "Ours reaches 2,950 GB/s, 87.3% of the ceiling, 1.23× eager, in 0.123 ms and 45 µs; 1.5 TB/s; 700 TFLOP/s."
    assert quoted(md) == ["2,950 GB/s", "87.3%", "1.23×", "0.123 ms", "45 µs", "1.5 TB/s", "700 TFLOP/s"]


@pytest.mark.parametrize(
    "md",
    [
        "```python\nx = 87.3%\n```",  # fenced code
        "Run `bench --ms 3.2 ms`.",  # inline code
        r"Traffic \(2.5 \times\) and \[ 87.3\% \]",  # math
        "Also $1.23×$ and $$ 45 ms $$",
        "<!-- bench:table fused_softmax sweep=M=8192 -->",  # directive
        "<!-- 12.5% -->",
        "The bar is ≥ 85%, at most 2.50× and no more than 3.2 ms; slightly above 100 %.",
        "It moves about **4×** the ideal traffic, 2x fewer passes.",  # whole multiples: arithmetic
        "The distance between our percentage of the ceiling and 100%, from 0 %.",  # ends of the scale
        "[a link](../x/12.5%/)",
        "A 64 KiB tile, 50 MiB of L2, 8 GiB of fp32.",  # sizes
        "---\ntitle: 12.5%\n---\n# Page",
    ],
)
def test_not_measurements(md):
    assert quoted(md) == []


def test_line_numbers_survive_masking():
    md = "# T\n\n```\ncode\n```\n\nIt runs at 1.23× here."
    assert [q.line for q in pn.find_quantities(md)] == [7]


@pytest.mark.parametrize(
    "text",
    [
        "1.50×",  # compile / ours, as the table prints it
        "1.5×",  # fewer figures
        "2.00×",  # eager / ours
        "0.50×",  # ours / eager
        "1.0 ms",
        "1.50 ms",
        "1,000 µs",
    ],
)
def test_measured_quotes_pass(measured, text):
    (q,) = pn.find_quantities(f"Here {text} there.")
    assert pn.matches(q, measured), text


def test_rates_and_percentages_pass_rounded(measured):
    # ours: 2*8192*1024*2 bytes in 1 ms = 33.554... GB/s = 1.118...% of 3000 GB/s
    for text in ("33.6 GB/s", "33.55 GB/s", "34 GB/s", "1.12%", "1.1%", "3,000 GB/s"):
        (q,) = pn.find_quantities(f"It reaches {text}.")
        assert pn.matches(q, measured), text


@pytest.mark.parametrize("text", ["1.70×", "33.9 GB/s", "2.5 ms", "9.99%", "1%", "4 GB/s"])
def test_unmeasured_quotes_fail(measured, text):
    (q,) = pn.find_quantities(f"It reaches {text}.")
    assert not pn.matches(q, measured), text


def test_page_without_results_may_quote_nothing():
    problems = pn.check_markdown("# Page\n\nOurs is 1.23× faster.\n", "kernels/no_such_chapter.md")
    assert len(problems) == 1 and "1.23×" in problems[0] and ":3:" in problems[0]


def test_placeholders_are_skipped():
    assert pn.is_placeholder("# rms_norm (placeholder: being written)\n")
    assert pn.check_markdown("# rms_norm (placeholder: being written)\n", "kernels/rms_norm.md") == []
    assert not pn.is_placeholder("# RMSNorm\n\nText.\n")


def test_hook_fails_the_build_on_an_unmeasured_quote():
    from academy.site import hooks

    from mkdocs.exceptions import PluginError

    class File:
        src_path = "kernels/vector_add.md"

    class Page:
        file = File()

    with pytest.raises(PluginError, match="9.87×"):
        hooks.on_page_markdown("# Vector addition\n\nOurs is 9.87× faster than torch.\n", page=Page())


@pytest.mark.parametrize("page", pn.kernel_pages(), ids=lambda p: p.name)
def test_every_finished_kernel_page(page):
    if not pn.is_finished(page):
        pytest.skip("placeholder page")
    problems = pn.check_page(page)
    assert not problems, "\n".join(problems)


def test_vendor_figures_named_as_such_are_not_measurements():
    assert quoted("Its datasheet gives roughly 990 dense TFLOP/s over\n3.35 TB/s, so the ridge is 300.") == []
    assert quoted("The datasheet says so. Ours reaches 3.35 TB/s.") == ["3.35 TB/s"]
