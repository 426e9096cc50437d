"""Accessibility of the built site, in Chromium: headings, alt text, contrast, keyboard, screenshots.

Uses the one visit of every page made by the ``page_reports`` fixture
(``academy/site/pytest_site.py``) for the per-page checks, and a few extra visits
for what needs a page of its own (contrast in both palettes, keyboard, screenshots).
"""

from __future__ import annotations

import re

from academy.bench.render import SERIES_COLORS
from academy.site.pytest_site import KATEX_DONE, PageWatch, heading_problems, summarize

import pytest

pytestmark = pytest.mark.slow

SCHEMES = {"light": "default", "dark": "slate"}
KEY_PAGES = {"home": "/", "kernel": "/kernels/fused_softmax/", "tutorial": "/tutorials/gelu/"}
ANNOTATED_PAGE = "/kernels/fused_softmax/"


def test_heading_rules():
    assert heading_problems([(1, "T"), (2, "a"), (3, "b"), (2, "c"), (3, "d"), (4, "e"), (2, "f")]) == []
    assert heading_problems([(1, "T"), (3, "b")]) == ["h1 -> h3 skips a level at 'b'"]
    assert heading_problems([(2, "a")])[0].startswith("first heading is h2")
    assert "2 h1 headings" in heading_problems([(1, "a"), (1, "b")])[0]


def test_headings_in_order_on_every_page(page_reports):
    report = summarize(page_reports, ("headings",))
    assert not report, report


def test_images_have_alt_text_on_every_page(page_reports):
    report = summarize(page_reports, ("images",))
    assert not report, report


# ---------------------------------------------------------------- contrast (WCAG 2.x)


def _channels(css: str) -> tuple[float, float, float]:
    if css.startswith("#"):
        return tuple(int(css[i : i + 2], 16) / 255 for i in (1, 3, 5))
    numbers = [float(v) for v in re.findall(r"[\d.]+", css)[:3]]
    return tuple(v / 255 for v in numbers)


def luminance(css: str) -> float:
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in _channels(css)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_contrast_formula():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("rgb(118, 118, 118)", "#ffffff") == pytest.approx(4.54, abs=0.01)


# What the reader sees of each series colour (after any stylesheet), the page's
# background and the theme's link colour.
THEME_COLOURS = """(colours) => {
  const host = document.querySelector('.md-typeset') || document.body;
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.innerHTML = colours.map(c => `<g class="series"><line stroke="${c}" fill="${c}"/></g>`).join('');
  host.appendChild(svg);
  const seen = [...svg.querySelectorAll('line')].map(l => getComputedStyle(l).stroke);
  svg.remove();
  const link = document.createElement('a');
  link.href = '#'; link.textContent = 'x';
  host.appendChild(link);
  const linkColour = getComputedStyle(link).color;
  link.remove();
  return {background: getComputedStyle(document.body).backgroundColor,
          scheme: document.body.getAttribute('data-md-color-scheme'), series: seen, link: linkColour};
}"""


@pytest.mark.parametrize("scheme", SCHEMES)
def test_theme_colours_contrast(base_url, browser, scheme):
    """Plot series (graphics: at least 3:1) and link text (at least 4.5:1) against the page background."""
    context = browser.new_context(color_scheme=scheme)
    page = context.new_page()
    page.goto(base_url + "/kernels/fused_softmax/", wait_until="networkidle")
    facts = page.evaluate(THEME_COLOURS, list(SERIES_COLORS))
    context.close()
    assert facts["scheme"] == SCHEMES[scheme]
    bg = facts["background"]
    lines = [f"{scheme} background {bg}"]
    bad = []
    for declared, seen in zip(SERIES_COLORS, facts["series"]):
        ratio = contrast(seen, bg)
        lines.append(f"  series {declared} (seen {seen}): {ratio:.2f}:1")
        if ratio < 3:
            bad.append(f"series colour {declared} is {ratio:.2f}:1 on the {scheme} background {bg} (needs 3:1)")
    link_ratio = contrast(facts["link"], bg)
    lines.append(f"  link {facts['link']}: {link_ratio:.2f}:1")
    if link_ratio < 4.5:
        bad.append(f"link colour {facts['link']} is {link_ratio:.2f}:1 on {bg} (needs 4.5:1)")
    print("\n".join(lines))
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------- keyboard


def test_code_annotations_are_keyboard_reachable(base_url, browser):
    """Tab reaches an annotation and shows its tooltip; Enter keeps it open; Escape is not a trap."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(base_url + ANNOTATED_PAGE, wait_until="networkidle")
    # Material builds the annotations from script after the load: wait for them, not for the network.
    page.wait_for_function("document.querySelectorAll('.md-annotation').length > 0", timeout=30_000)
    total = page.evaluate("document.querySelectorAll('.md-annotation').length")
    assert total > 0, f"{ANNOTATED_PAGE} has no code annotations to test"
    focused, presses = None, 0
    while not focused and presses < 500:
        presses += 1
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "(() => { const e = document.activeElement; return e && e.closest('.md-annotation') ? true : false })()"
        )
    assert focused, "500 presses of Tab never focused a code annotation"
    print(f"first annotation focused after {presses} Tab presses")
    # Material builds the tooltip when the annotation gets focus: wait for it to show.
    tooltip_shown = """() => {
      const a = document.activeElement && document.activeElement.closest('.md-annotation');
      const t = a && a.querySelector('.md-tooltip');
      return !!t && getComputedStyle(t).visibility === 'visible' && t.textContent.trim().length > 0;
    }"""
    try:
        page.wait_for_function(tooltip_shown, timeout=3_000)
    except Exception:
        pytest.fail("focusing a code annotation with Tab did not show its tooltip")
    page.keyboard.press("Enter")
    page.wait_for_function(KATEX_DONE, timeout=3_000)
    assert page.evaluate(tooltip_shown), "Enter closed or lost the annotation's tooltip"
    page.keyboard.press("Tab")  # focus moves on: the annotation is not a keyboard trap
    assert page.evaluate("document.activeElement !== null")
    context.close()


# ---------------------------------------------------------------- screenshots


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("name", KEY_PAGES)
def test_key_page_screenshots(base_url, browser, screenshot_dir, name, scheme):
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    watch = PageWatch(context)
    page = context.new_page()
    watch.attach(page)
    page.goto(base_url + KEY_PAGES[name], wait_until="networkidle")
    page.wait_for_function(KATEX_DONE, timeout=10_000)
    palette = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    path = screenshot_dir / f"{name}-{scheme}.png"
    page.screenshot(path=str(path), full_page=True)
    context.close()
    print(f"screenshot: {path}")
    assert palette == SCHEMES[scheme]
    assert not watch.external and not watch.errors, watch.external + watch.errors
