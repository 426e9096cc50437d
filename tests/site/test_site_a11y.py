"""Accessibility of the built site, in Chromium: axe-core, headings, alt text, contrast, keyboard, screenshots.

Uses the one visit of every page made by the ``page_reports`` fixture
(``academy/site/pytest_site.py``) for the per-page checks, axe-core's included; a second
visit of every page in the dark scheme (``dark_axe_reports``) for axe-core's colour rules;
and a few extra visits for what needs a page of its own (theme colours in both palettes,
plots on a phone, keyboard, screenshots).

What axe-core found and how it was fixed: ``docs/stylesheets/a11y.css`` (underlined
links, code and notebook colours, plots that keep a legible width) and
``docs/javascripts/a11y.js`` (scrolling regions reachable by keyboard, names for the
annotation markers and the search dialog).
"""

from __future__ import annotations

import re

from academy.bench.render import SERIES_COLORS
from academy.site.pytest_site import (
    AXE_COLOUR_RULES,
    KATEX_DONE,
    PageWatch,
    contrast_ratio,
    heading_problems,
    run_axe,
    settled_scheme,
    summarize,
)

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


def test_no_table_is_cut_off_in_a_1280_pixel_window(page_reports):
    """Every table fits its column at 1280 px. The benchmark tables were up to 1,390 px
    wide in a 720 px column, and 1,085 px in a tutorial's 540 px one (academy/bench/render.py
    now fits them, docs/stylesheets/a11y.css lets header text wrap)."""
    report = summarize(page_reports, ("tables",))
    assert not report, report


def test_images_have_alt_text_on_every_page(page_reports):
    report = summarize(page_reports, ("images",))
    assert not report, report


# ---------------------------------------------------------------- axe-core


def test_axe_finds_nothing_serious_on_every_page(page_reports):
    """Every rule of axe-core (WCAG 2.x A and AA, and best practices), light scheme:
    no serious or critical violation."""
    report = summarize(page_reports, ("axe",))
    assert not report, report


def test_axe_finds_nothing_serious_in_the_dark_scheme(dark_axe_reports):
    """axe-core's colour rules on every page in the dark scheme."""
    bad = {path: lines for path, lines in dark_axe_reports.items() if lines}
    report = "\n".join(f"{path}:\n  " + "\n  ".join(lines) for path, lines in bad.items())
    assert not bad, f"{len(bad)} of {len(dark_axe_reports)} pages in the dark scheme:\n{report}"


def test_axe_catches_what_it_must(browser):
    """The check can fail: faint text, an unnamed link and a colour-only link are caught."""
    page = browser.new_page()
    page.set_content(
        '<html lang="en"><head><title>t</title></head><body><main><h1>T</h1>'
        '<p style="color:#bbb">faint text</p><a href="#a"></a>'
        '<p style="color:#000">text with a <a href="#b" style="color:#333;text-decoration:none">link</a> in it</p>'
        '<div class="highlight" style="background:#f5f5f5"><pre><code><span><span class="k" style="color:#000">'
        'def</span> <span class="n" style="color:#ccc">faint</span></span></code></pre></div>'
        "</main></body></html>"
    )
    everything, colours = run_axe(page), run_axe(page, AXE_COLOUR_RULES)
    page.close()
    for rule in ("color-contrast", "link-name", "link-in-text-block"):
        assert any(line.startswith(f"axe {rule} ") for line in everything), (rule, everything)
    assert {line.split()[1] for line in colours} == {"color-contrast", "link-in-text-block", "highlighted"}, colours
    faint_code = [line for line in colours if line.startswith("code-contrast")]
    assert len(faint_code) == 1 and "#cccccc on #f5f5f5" in faint_code[0] and ".n" in faint_code[0], colours


def test_axe_measures_text_once_it_has_faded_in(browser):
    """A tooltip fading in is measured as it ends, not half-drawn (a CI run once caught
    annotation text at 1.01:1 mid-fade)."""
    page = browser.new_page()
    page.set_content(
        '<html lang="en"><head><title>t</title></head><body><main><h1>T</h1>'
        '<p id="tip" style="color:#000;opacity:0.02;transition:opacity 1.5s">fading in</p>'
        "</main></body></html>"
    )
    page.evaluate("document.getElementById('tip').style.opacity = 1")
    lines = run_axe(page, AXE_COLOUR_RULES)
    page.close()
    assert lines == [], lines


# Each plot's smallest text as drawn, in CSS pixels: the SVG's font size times its scale.
PLOT_TEXT_PX = """() => [...document.querySelectorAll('.academy-plot svg')]
  .filter(svg => svg.getBoundingClientRect().width > 0)
  .map(svg => Math.min(...[...svg.querySelectorAll('text')]
    .map(t => svg.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize))))"""


@pytest.mark.parametrize("path", ["/kernels/fused_softmax/", "/tutorials/gpu_model/"])
def test_plot_text_is_legible_on_a_phone(base_url, browser, path):
    """On a 375-pixel-wide phone a plot keeps a width where its smallest text is at least
    11 px (it was 6 px), and scrolls sideways instead: a chapter's plots and a tutorial's."""
    context = browser.new_context(viewport={"width": 375, "height": 812})
    page = context.new_page()
    page.goto(base_url + path, wait_until="networkidle")
    # A loaded CI machine has once measured the plots before their first layout (all of
    # width 0); wait for one to be drawn, up to 20 s, before measuring them all.
    page.wait_for_function(f"({PLOT_TEXT_PX})().length > 0", timeout=20_000)
    sizes = page.evaluate(PLOT_TEXT_PX)
    context.close()
    assert sizes, f"no visible plot on {path}"
    assert min(sizes) >= 11, f"plot text {min(sizes):.1f} px on a phone (smallest of {len(sizes)} plots on {path})"


# ---------------------------------------------------------------- contrast (WCAG 2.x)


def contrast(a: str, b: str) -> float:
    """The contrast of two CSS colours as computed styles give them ("#rrggbb", "rgb(r, g, b)")."""

    def channels(css: str) -> tuple[float, float, float]:
        if css.startswith("#"):
            return tuple(int(css[i : i + 2], 16) for i in (1, 3, 5))
        return tuple(float(v) for v in re.findall(r"[\d.]+", css)[:3])

    return contrast_ratio(channels(a), channels(b))


def test_contrast_formula():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
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
    settled_scheme(page, SCHEMES[scheme])
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
    palette = settled_scheme(page, SCHEMES[scheme])
    path = screenshot_dir / f"{name}-{scheme}.png"
    page.screenshot(path=str(path), full_page=True)
    context.close()
    print(f"screenshot: {path}")
    assert palette == SCHEMES[scheme]
    assert not watch.external and not watch.errors, watch.external + watch.errors
