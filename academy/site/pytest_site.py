"""Pytest plugin: the built site, a browser, and one visit of every page, shared by the site tests.

Registered by the root ``conftest.py``. Everything is session-scoped so the
whole site suite (``tests/site/test_site*.py``) builds the site **once**, starts
**one** Chromium (one per pytest-xdist worker), and opens every page **once**
(under xdist the workers split the pages and share the results: the build by
`site_build`, the visits by `visit_each_page_once`):

* ``site_build`` / ``site_dir``: ``mkdocs build --strict`` into a temporary
  folder (any warning fails), timed;
* ``base_url``: a local HTTP server over it (127.0.0.1, random port);
* ``browser``: a system Chromium through Playwright (``find_chromium``:
  ``$ACADEMY_CHROMIUM``, else ``chromium``, ``chromium-browser`` or
  ``google-chrome`` on ``PATH``, else one that ``playwright install`` put
  there); ``ACADEMY_SKIP_BROWSER=1`` skips the browser tests;
* ``page_reports``: every page visited once, each `PageReport` holding
  what every per-page check needs (problems by category, headings, images,
  local bytes transferred, axe-core's serious and critical violations);
* ``dark_axe_reports``: every page visited once more in the dark colour scheme,
  with axe-core's colour rules only;
* ``screenshot_dir``: where screenshots go: ``--screenshots DIR``, else
  ``$ACADEMY_SCREENSHOTS``, else ``test-artifacts/``.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
# Looked up on PATH in this order when $ACADEMY_CHROMIUM does not name the browser.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# A marker as Pygments leaves it in a highlighted code comment (prose mentions of
# `# (1)!` are inline <code>, not a comment span, and do not count).
ANNOTATION_MARKER = re.compile(r'<span class="c1?">#[^<]*\(\d+\)!')


def pytest_addoption(parser):
    parser.addoption(
        "--screenshots",
        action="store",
        default=None,
        metavar="DIR",
        help="where the site tests save their screenshots (default: $ACADEMY_SCREENSHOTS or test-artifacts/); "
        "write it --screenshots=DIR when no test path is given",
    )


# ---------------------------------------------------------------- build and serve


MKDOCS_PROBLEM = re.compile(r"(WARNING|ERROR)\s+-\s")


@dataclass(frozen=True)
class SiteBuild:
    path: Path
    seconds: float
    log: str
    cpu_seconds: float = float("nan")
    """User and system time of the build and every process it started (the notebooks' kernels)."""


def shared_temp_dir(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run shares (their common base temp), or this
    process's own base temp when pytest runs alone."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def site_build(tmp_path_factory) -> SiteBuild:
    """The strict build, timed, made once per run: under pytest-xdist the first worker to need it
    builds while the others wait on a file lock, then read its record (two builds at once on the
    CI's two cores would each take twice as long). ``ACADEMY_SITE_DIR=/path`` reuses a site built
    there beforehand (for iterating on the browser tests; the build-time test then skips)."""
    prebuilt = os.environ.get("ACADEMY_SITE_DIR")
    if prebuilt:
        path = Path(prebuilt).resolve()
        assert (path / "index.html").is_file(), f"ACADEMY_SITE_DIR={prebuilt} holds no built site"
        return SiteBuild(path, float("nan"), "")
    shared = shared_temp_dir(tmp_path_factory)
    out, record = shared / "site", shared / "site-build.json"
    with open(shared / "site-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            record.write_text(json.dumps(_build_site(out)))
    built = json.loads(record.read_text())
    assert built["returncode"] == 0, f"mkdocs build --strict failed:\n{built['log']}"
    # MkDocs' own records only ("WARNING -  ...", "ERROR   -  ..."). The Jupyter kernels that
    # execute the tutorials log through tornado too, and once in many builds print
    # "ERROR:tornado.general:Uncaught exception in ZMQStream callback" as a kernel shuts
    # down; a cell that really fails stops the build (allow_errors: false) instead.
    warnings = [line for line in built["log"].splitlines() if MKDOCS_PROBLEM.match(line)]
    assert not warnings, "the build must be warning-free:\n" + "\n".join(warnings)
    return SiteBuild(out, built["seconds"], built["log"], built["cpu_seconds"])


def _build_site(out: Path) -> dict:
    """Run ``mkdocs build --strict`` into ``out``: its exit status, log, wall and CPU seconds."""
    import resource

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env["ACADEMY_NB_CACHE"] = "0"  # every notebook executes: no output from the cache (academy.site.notebook_cache)
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    # CPU seconds tell a slow machine from a busy one: wall >> CPU / cores means other load.
    print(f"site built in {elapsed:.1f} s on {os.cpu_count()} cores ({cpu:.1f} CPU-s in the build's processes)")
    return {"returncode": proc.returncode, "log": proc.stdout + proc.stderr, "seconds": elapsed, "cpu_seconds": cpu}


@pytest.fixture(scope="session")
def site_dir(site_build) -> Path:
    return site_build.path


@pytest.fixture(scope="session")
def base_url(site_dir) -> str:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def find_chromium(playwright=None) -> Path | None:
    """The browser the site tests drive: ``$ACADEMY_CHROMIUM`` if set (even if missing, so a
    wrong setting fails), else the first of `CHROMIUM_NAMES` on ``PATH``, else
    Playwright's own Chromium if ``playwright install chromium`` has put one there."""
    named = os.environ.get("ACADEMY_CHROMIUM", "").strip()
    if named:
        return Path(named)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    if playwright is not None:
        own = Path(playwright.chromium.executable_path)
        if own.is_file():
            return own
    return None


@pytest.fixture(scope="session")
def browser():
    if os.environ.get("ACADEMY_SKIP_BROWSER") == "1":
        pytest.skip("ACADEMY_SKIP_BROWSER=1: browser checks skipped")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = find_chromium(p)
        if chromium is None or not chromium.is_file():
            pytest.fail(
                f"no Chromium for the site tests ({chromium or 'none of ' + ', '.join(CHROMIUM_NAMES) + ' on PATH'}). "
                "Install one (`apt-get install -y chromium` as root; `make test` does this) or point "
                "ACADEMY_CHROMIUM at it, or set ACADEMY_SKIP_BROWSER=1 to skip the browser checks.",
                pytrace=False,
            )
        browser = p.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def screenshot_dir(pytestconfig) -> Path:
    where = pytestconfig.getoption("--screenshots") or os.environ.get("ACADEMY_SCREENSHOTS") or ARTIFACTS
    path = Path(where).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def site_pages(site_dir: Path) -> list[str]:
    """URL paths of every page: each index.html under the site."""
    paths = []
    for index in sorted(site_dir.rglob("index.html")):
        rel = index.parent.relative_to(site_dir).as_posix()
        paths.append("/" if rel == "." else f"/{rel}/")
    return paths


class PageWatch:
    """Records what a page does: requests, failures, console and page errors, bytes received."""

    def __init__(self, context, gzip_sizes: bool = False):
        self.external: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.bytes: dict[str, int] = {}  # local URL -> body bytes as served (uncompressed)
        self.gzip_bytes: dict[str, int] = {}  # local URL -> its gzip size (what a compressing host sends)
        self._gzip = gzip_sizes
        context.route("**/*", self._route)

    def clear(self):
        self.external.clear(), self.failed.clear(), self.errors.clear(), self.bytes.clear(), self.gzip_bytes.clear()

    def _route(self, route):
        url = route.request.url
        if urlsplit(url).hostname not in LOCAL_HOSTS:
            self.external.append(url)
            route.abort()
        else:
            route.continue_()

    def attach(self, page):
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(f"console: {msg.text}"))
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("requestfailed", lambda req: self._failed(req, req.failure))
        page.on("response", self._response)

    def _response(self, resp):
        if resp.status >= 400:
            self.failed.append(f"{resp.status} {resp.url}")
        elif urlsplit(resp.url).hostname in LOCAL_HOSTS and not resp.url.startswith("data:"):
            try:
                body = resp.body()
                self.bytes[resp.url] = len(body)
                if self._gzip:
                    import gzip

                    self.gzip_bytes[resp.url] = len(gzip.compress(body, 6))
            except Exception:
                pass

    def _failed(self, request, failure):
        if urlsplit(request.url).hostname in LOCAL_HOSTS:
            self.failed.append(f"{failure} {request.url}")


# ---------------------------------------------------------------- axe-core

# axe-core's impacts that fail a page; "moderate" and "minor" are reported by axe but allowed.
AXE_FAILING = ("serious", "critical")
# The rules whose outcome depends on the colour scheme: the second (dark) visit runs only
# these, since every other rule sees the same markup in both schemes.
AXE_COLOUR_RULES = ("color-contrast", "link-in-text-block")


@functools.cache
def axe_source() -> str:
    """axe-core's browser script, as bundled (unmodified, MPL-2.0) by the axe-playwright-python
    package: served from disk, so the check needs no network."""
    from importlib.resources import files

    return files("axe_playwright_python").joinpath("axe.min.js").read_text()


# Resolves once every animation that ends has ended (a tooltip fading in, a palette
# switch): axe measures colours as drawn, and text caught half-faded-in reads as
# #f3f3f3 on #f5f5f5. Two frames first, so a transition a click started has begun.
# The annotation markers pulse forever; they never end and are not waited for.
ANIMATIONS_SETTLED = """async () => {
  for (let i = 0; i < 2; i++) await new Promise(r => requestAnimationFrame(r));
  const ending = document.getAnimations()
    .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity);
  await Promise.all(ending.map(a => a.finished.catch(() => null)));
}"""


# Highlighted code is thousands of token spans a page (16,000 of the attention chapter's
# 30,000 elements) in a few dozen colour pairs: axe's contrast rule took half a minute a
# page on them. So that rule skips code blocks, except the annotations and their
# tooltips, and `code_colour_problems` checks each distinct colour pair of the rest once.
CODE_BLOCKS = ".highlight"
CODE_ANNOTATIONS = ".highlight .md-annotation"
CODE_TEXT = ".highlight *:not(.md-annotation, .md-annotation *)"

# Every distinct (text colour as drawn, background) pair of the code tokens shown: the
# colour over the layers of background below it (alpha and opacity composited, as a
# browser draws them), with how many spans have it and one class for the report.
CODE_COLOURS = """(selector) => {
  const rgba = css => {
    if (!css.startsWith('rgb')) throw new Error(`a colour this check cannot read: ${css}`);
    const v = css.match(/[\\d.]+/g).map(Number);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  };
  const over = (top, below) => [0, 1, 2].map(i => top[i] * top[3] + below[i] * (1 - top[3])).concat([1]);
  const backdrop = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    return layers.reverse().reduce((below, layer) => over(layer, below), [255, 255, 255, 1]);
  };
  const pairs = new Map();
  for (const el of document.querySelectorAll(selector)) {
    const hasText = [...el.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!hasText || !el.getClientRects().length) continue;
    let opacity = 1;
    for (let e = el; e; e = e.parentElement) opacity *= parseFloat(getComputedStyle(e).opacity);
    const fg = rgba(getComputedStyle(el).color);
    fg[3] *= opacity;
    const bg = backdrop(el);
    const drawn = over(fg, bg);
    const key = `${drawn.slice(0, 3)}|${bg.slice(0, 3)}`;
    const pair = pairs.get(key) || {fg: drawn.slice(0, 3), bg: bg.slice(0, 3), count: 0, example: el.className};
    pair.count += 1;
    pairs.set(key, pair);
  }
  return [...pairs.values()];
}"""


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def relative_luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2.x relative luminance of an sRGB colour given as 0-255 channels."""
    r, g, b = (_linear(c / 255) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """WCAG 2.x contrast ratio of two sRGB colours, 1 to 21."""
    hi, lo = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _hex(rgb) -> str:
    return "#" + "".join(f"{round(c):02x}" for c in rgb)


def code_colour_problems(page) -> list[str]:
    """Highlighted code text below 4.5:1 against its background (the bar of axe's rule for
    text of that size), one line per colour pair."""
    lines = []
    for pair in page.evaluate(CODE_COLOURS, CODE_TEXT):
        ratio = contrast_ratio(pair["fg"], pair["bg"])
        if ratio < 4.5:
            lines.append(
                f"code-contrast: highlighted code {_hex(pair['fg'])} on {_hex(pair['bg'])} is {ratio:.2f}:1 "
                f"(needs 4.5:1), {pair['count']} span(s) such as .{pair['example']}"
            )
    return lines


def run_axe(page, rules: tuple[str, ...] | None = None) -> list[str]:
    """axe-core's serious and critical violations on the loaded page (``rules``: only those),
    once its animations have ended, one line per rule: how many elements, and the first few
    with what axe measured (colours, contrast). Where the contrast rule runs, highlighted
    code's colours are checked by `code_colour_problems` instead, pair by pair."""
    page.evaluate(ANIMATIONS_SETTLED)
    page.evaluate(axe_source())
    contrast = rules is None or "color-contrast" in rules
    base = {"resultTypes": ["violations"]}
    runs = []
    if rules is None:
        runs.append((None, base | {"rules": {"color-contrast": {"enabled": False}}}))
    elif others := sorted(set(rules) - {"color-contrast"}):
        runs.append((None, base | {"runOnly": {"type": "rule", "values": others}}))
    if contrast:
        only_contrast = base | {"runOnly": {"type": "rule", "values": ["color-contrast"]}}
        runs.append(({"exclude": [[CODE_BLOCKS]]}, only_contrast))
        if page.locator(CODE_ANNOTATIONS).count():
            runs.append(({"include": [[CODE_ANNOTATIONS]]}, only_contrast))
    violations: dict[str, dict] = {}
    for context, options in runs:
        found = page.evaluate("([context, options]) => axe.run(context ?? document, options)", [context, options])
        for v in found["violations"]:
            if v["id"] in violations:
                violations[v["id"]]["nodes"] += v["nodes"]
            else:
                violations[v["id"]] = v
    lines = []
    for v in violations.values():
        if v["impact"] not in AXE_FAILING:
            continue
        examples = []
        for node in v["nodes"][:3]:
            check = (node["any"] or node["all"] or node["none"] or [{}])[0]
            data = check.get("data") if isinstance(check.get("data"), dict) else {}
            measured = ", ".join(f"{k} {data[k]}" for k in ("fgColor", "bgColor", "contrastRatio") if data.get(k))
            examples.append(f"{' '.join(map(str, node['target']))[:90]}" + (f" ({measured})" if measured else ""))
        lines.append(f"axe {v['id']} ({v['impact']}) on {len(v['nodes'])} element(s): {'; '.join(examples)}")
    if contrast:
        lines += code_colour_problems(page)
    return lines


# ---------------------------------------------------------------- page scripts

# Runs in the page once it has loaded: wait until KaTeX has had its turn.
KATEX_DONE = """() => {
  const math = document.querySelectorAll('.arithmatex');
  return [...math].every(el => el.querySelector('.katex, .katex-error'));
}"""

PAGE_FACTS = r"""() => {
  const article = document.querySelector('.md-content article') || document.body;
  const visible = el => !el.closest('.md-tooltip, .md-annotation, nav, .md-sidebar, [hidden]');
  // TeX left raw in rendered notebook markdown: $...$ or \(...\) outside KaTeX output and code.
  const rawTex = [];
  for (const cell of document.querySelectorAll('.jp-RenderedMarkdown, .jp-MarkdownOutput')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode())) {
      if (node.parentElement.closest('.katex, code, pre, script')) continue;
      const t = node.textContent;
      if (/\$[^$\s][^$]*\$|\\\(|\\\[/.test(t)) rawTex.push(t.trim().slice(0, 60));
    }
  }
  return {
    arithmatex: document.querySelectorAll('.arithmatex').length,
    unrendered: [...document.querySelectorAll('.arithmatex')]
        .filter(el => !el.querySelector('.katex')).map(el => el.textContent.slice(0, 60)),
    katexErrors: [...document.querySelectorAll('.katex-error')].map(el => el.textContent.slice(0, 60)),
    rawTex,
    annotations: document.querySelectorAll('.md-annotation').length,
    headings: [...article.querySelectorAll('h1, h2, h3, h4, h5, h6')].filter(visible)
        .map(h => [Number(h.tagName[1]), h.textContent.replace(/¶$/, '').trim().slice(0, 60)]),
    images: [...article.querySelectorAll('img')].filter(visible)
        .filter(img => !(img.getAttribute('alt') || '').trim()
                       && img.getAttribute('role') !== 'presentation' && img.getAttribute('aria-hidden') !== 'true')
        .map(img => (img.getAttribute('src') || '').slice(0, 80)),
    // Tables wider than the room their column gives them, at the visit's 1280-pixel window:
    // from the table's left edge to the visible right edge of the region that scrolls it
    // (Material's scroll wrapper), or wider than the table's own box (a table scrolls too).
    wideTables: [...article.querySelectorAll('table')].filter(t => t.getClientRects().length)
        .map(t => {
          const wrap = t.closest('.md-typeset__scrollwrap') || t.parentElement;
          const room = wrap.getBoundingClientRect().left + wrap.clientLeft + wrap.clientWidth
                       - t.getBoundingClientRect().left;
          return [t, Math.round(room)];
        })
        .filter(([t, room]) => t.scrollWidth > room + 1 || t.scrollWidth > t.clientWidth + 1)
        .map(([t, room]) => `${(t.querySelector('th') || t).textContent.trim().slice(0, 40)}: `
             + `${t.scrollWidth} px in ${room} px`),
    svgs: [...article.querySelectorAll('svg[role="img"]')]
        .filter(svg => !(svg.getAttribute('aria-label') || '').trim() && !svg.querySelector(':scope > title'))
        .map(svg => svg.outerHTML.slice(0, 80)),
  };
}"""


@dataclass
class PageReport:
    path: str
    problems: dict[str, list[str]] = field(default_factory=dict)  # category -> lines
    headings: list[tuple[int, str]] = field(default_factory=list)
    bytes: int = 0
    requests: int = 0

    def add(self, category: str, lines: list[str]) -> None:
        if lines:
            self.problems.setdefault(category, []).extend(lines)


# A laptop's window: no table may need scrolling sideways at this width.
VISIT_VIEWPORT = {"width": 1280, "height": 800}

OPEN_ENCLOSING_DETAILS = """el => {
  for (let d = el.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) d.open = true;
}"""


def open_annotations(page, count: int) -> list[str]:
    """Open each code annotation: Material inserts its tooltip only now, and math there must render too."""
    found = []
    markers = page.locator(".md-annotation__index")
    for i in range(count):
        # A marker in a collapsed block (an exercise's answer) has no box to click: open the
        # blocks around it first, as a reader would.
        markers.nth(i).evaluate(OPEN_ENCLOSING_DETAILS)
        markers.nth(i).click(force=True)  # force: the markers pulse, so they are never "stable"
        try:
            page.wait_for_function(KATEX_DONE, timeout=3_000)
        except Exception:
            found.append(f"math in code annotation {i + 1} was not rendered by KaTeX")
    return found


def heading_problems(headings: list[tuple[int, str]]) -> list[str]:
    """One h1 first, and no level skipped on the way down (h2 -> h4 is a skip; h4 -> h2 is fine)."""
    if not headings:
        return ["no headings"]
    problems = []
    if headings[0][0] != 1:
        problems.append(f"first heading is h{headings[0][0]} ({headings[0][1]!r}), not h1")
    h1s = [text for level, text in headings if level == 1]
    if len(h1s) > 1:
        problems.append(f"{len(h1s)} h1 headings: {h1s}")
    for (prev, _), (level, text) in zip(headings, headings[1:]):
        if level > prev + 1:
            problems.append(f"h{prev} -> h{level} skips a level at {text!r}")
    return problems


def visit(page, watch: PageWatch, url: str, site_dir: Path, path: str) -> PageReport:
    watch.clear()
    report = PageReport(path)
    page.goto(url, wait_until="load")
    try:
        page.wait_for_function(KATEX_DONE, timeout=10_000)
    except Exception:
        report.add("render", ["KaTeX did not render within 10 s"])
    page.wait_for_load_state("networkidle")
    facts = page.evaluate(PAGE_FACTS)
    report.bytes, report.requests = sum(watch.bytes.values()), len(watch.bytes)
    render_problems = []
    if facts["unrendered"]:
        render_problems.append(f"math not rendered by KaTeX: {facts['unrendered']}")
    if facts["katexErrors"]:
        render_problems.append(f"KaTeX errors: {facts['katexErrors']}")
    if facts["rawTex"]:
        render_problems.append(f"raw TeX left in notebook markdown: {facts['rawTex'][:5]}")
    render_problems += open_annotations(page, facts["annotations"])
    html = (site_dir / path.lstrip("/") / "index.html").read_text()
    markers = len(ANNOTATION_MARKER.findall(html))
    if facts["annotations"] < markers:
        render_problems.append(f"{markers} code-annotation markers but {facts['annotations']} rendered annotations")
    report.add("render", render_problems)
    # After the annotations are open: their tooltips are part of what a reader meets.
    report.add("axe", run_axe(page))
    report.add("network", [f"request to another host: {u}" for u in watch.external])
    report.add("network", [f"failed request: {what}" for what in watch.failed])
    report.add("console", list(watch.errors))
    report.headings = [tuple(h) for h in facts["headings"]]
    report.add("headings", heading_problems(report.headings))
    report.add("images", [f"img without alt text: {src}" for src in facts["images"]])
    report.add("images", [f"svg[role=img] without aria-label or title: {s}" for s in facts["svgs"]])
    report.add("tables", [f"table cut off: {t}" for t in facts["wideTables"]])
    return report


# Seconds a page another worker claimed may go without its result before the wait gives up.
# A visit takes seconds (about half a minute on the CI's two cores, two workers at once), so
# this only ends a hang; a worker that fails or dies on a page is noticed at once.
CLAIMED_VISIT_TIMEOUT_S = 600
T = TypeVar("T")


def visit_each_page_once(
    tmp_path_factory, kind: str, pages: list[str], visit_page: Callable[[str], T], *, wait: bool = True
) -> dict[str, T]:
    """``visit_page(path)`` for every page, made once per run however many workers ask.

    Under pytest-xdist every worker whose tests need a kind of visit (``kind``: "light" or
    "dark-axe") calls this, and each would otherwise visit every page itself: the same
    quarter of an hour twice on the CI's two cores. So the workers share the work through
    their common temp dir: each page is claimed by one worker (a claim file made with
    O_EXCL), which visits it and writes the result there (pickled, written whole and then
    renamed into place); the others load it. A worker claims pages one at a time until none
    is left, then waits for the pages other workers claimed. One that never needs this kind
    claims nothing, so a worker alone visits every page. Without xdist the pages are visited
    here, one after another, with no files. ``wait=False`` only helps: the worker takes its share
    of the pages no worker has claimed yet and returns the results it made, without waiting for
    the others' (alone, without xdist, it does nothing: the worker that asks will visit them).

    A result must not depend on which worker made it, nor on the pages it visited before. Each
    worker visits in a fresh context of its own, set up alike; the light visit routes every
    request (`PageWatch`), which turns Chromium's HTTP cache off, so a page's bytes are its
    first-visit bytes whatever came before; the dark visit keeps nothing a cache could change.
    Only the port of each worker's server differs, in the URLs a problem line may quote."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    start = time.perf_counter()
    if not worker and not wait:
        return {}
    if not worker:
        results = {path: visit_page(path) for path in pages}
        print(f"{kind} visit: {len(pages)} pages in {time.perf_counter() - start:.1f} s")
        return results
    shared = shared_temp_dir(tmp_path_factory) / f"visits-{kind}"
    shared.mkdir(exist_ok=True)
    results = {}
    for path in pages:
        claim, result, failed = _page_files(shared, path)
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue  # another worker has it
        with os.fdopen(fd, "w") as held:
            # Locked while this worker is on the page. The kernel lets go of a lock when its
            # process ends, however it ends, so a waiting worker finds a crash at once.
            fcntl.flock(held, fcntl.LOCK_EX)
            held.write(worker)
            held.flush()
            try:
                results[path] = visit_page(path)
            except BaseException as exc:
                failed.write_text(f"{type(exc).__name__}: {exc}")  # for the waiting workers' error
                if wait or not isinstance(exc, Exception):
                    raise
                return results  # a helper stops there: the test that waits for this page reports it
            partial = Path(f"{result}.{worker}.tmp")
            partial.write_bytes(pickle.dumps(results[path]))
            os.replace(partial, result)  # whole or absent: a reader never sees half a file
    visited, waiting = len(results), time.perf_counter()
    if not wait:
        print(f"{kind} visit: {visited} of {len(pages)} pages by {worker} in {waiting - start:.1f} s, as a helper")
        return results
    for path in pages:
        if path not in results:
            results[path] = _claimed_result(path, *_page_files(shared, path))
    print(
        f"{kind} visit: {visited} of {len(pages)} pages by {worker} in {waiting - start:.1f} s, "
        f"then {time.perf_counter() - waiting:.1f} s waiting for the other workers' {len(pages) - visited}"
    )
    return {path: results[path] for path in pages}  # in the pages' order, as without xdist


def _page_files(shared: Path, path: str) -> tuple[Path, Path, Path]:
    """One page's claim, result and failure files in the workers' shared folder."""
    name = quote(path, safe="")  # "/kernels/gelu/" -> "%2Fkernels%2Fgelu%2F"
    return shared / f"{name}.claim", shared / f"{name}.result", shared / f"{name}.failed"


def _claimed_result(path: str, claim: Path, result: Path, failed: Path):
    """The result of a page another worker claimed, once written; an error if that worker failed
    to visit it, let go of its claim without a result (it died) or has held it for
    CLAIMED_VISIT_TIMEOUT_S."""
    while True:
        # The claimer writes its name once it holds the lock: from then on a free lock means it has
        # let go. Looked at before the result, so a worker found gone has written all it ever will.
        claimer, let_go = claim.read_text(), False
        if claimer:
            with open(claim) as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released as the file closes
                    let_go = True
                except BlockingIOError:
                    pass
        if result.exists():
            return pickle.loads(result.read_bytes())
        if failed.exists():
            raise RuntimeError(f"worker {claimer} failed to visit {path}: {failed.read_text()}")
        if let_go:
            raise RuntimeError(f"worker {claimer} claimed {path} and exited without writing its result")
        if time.time() - claim.stat().st_mtime > CLAIMED_VISIT_TIMEOUT_S:
            raise TimeoutError(
                f"worker {claimer or '?'} claimed {path} over {CLAIMED_VISIT_TIMEOUT_S} s ago and has "
                f"not written its result ({result})"
            )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def page_reports(site_dir, base_url, browser, tmp_path_factory, pytestconfig) -> dict[str, PageReport]:
    """Every page, visited once in a fresh context (first-visit bytes), in light mode, in a
    1280-pixel-wide window; split between the xdist workers that need it. When this run's tests
    also want the dark visits, a worker then takes its share of those too (`dark_axe_reports`):
    the one worker whose test needs them would otherwise make them all alone, while the others
    have finished their share of the light visits."""
    pages = site_pages(site_dir)
    assert "/" in pages and len(pages) > 3, f"suspiciously few pages: {pages}"
    context = browser.new_context(viewport=VISIT_VIEWPORT)
    try:
        watch = PageWatch(context)
        page = context.new_page()
        watch.attach(page)
        reports = visit_each_page_once(
            tmp_path_factory, "light", pages, lambda path: visit(page, watch, base_url + path, site_dir, path)
        )
    finally:
        context.close()
    if pytestconfig.stash.get(DARK_VISITS_WANTED, False):
        visit_dark_pages(browser, base_url, tmp_path_factory, pages, wait=False)
    return reports


DARK_VISITS_WANTED = pytest.StashKey[bool]()
"""Whether a test of this run asks for `dark_axe_reports` (every worker collects every test)."""


def pytest_collection_modifyitems(config, items):
    config.stash[DARK_VISITS_WANTED] = any("dark_axe_reports" in getattr(i, "fixturenames", ()) for i in items)


def settled_scheme(page, expected: str, timeout_ms: int = 10_000) -> str:
    """The palette Material applied, once it is `expected` or `timeout_ms` has passed.

    Material's script picks the palette matching ``prefers-color-scheme`` after the page has
    loaded, so on a slow machine the body can still show the first palette at "networkidle".
    """
    try:
        page.wait_for_function(
            "(want) => document.body.getAttribute('data-md-color-scheme') === want", arg=expected, timeout=timeout_ms
        )
    except Exception:
        pass  # the caller reports the scheme it found
    return page.evaluate("document.body.getAttribute('data-md-color-scheme')")


def dark_axe_visit(page, url: str) -> list[str]:
    """The dark visit of one page: the scheme Material chose, then axe-core's colour rules."""
    page.goto(url, wait_until="load")
    try:
        page.wait_for_function(KATEX_DONE, timeout=10_000)
    except Exception:
        pass  # the light visit reports math that did not render
    page.wait_for_load_state("networkidle")
    scheme = settled_scheme(page, "slate")
    lines = [f"the dark visit found the {scheme!r} scheme"] if scheme != "slate" else []
    return lines + run_axe(page, AXE_COLOUR_RULES)


def visit_dark_pages(browser, base_url: str, tmp_path_factory, pages: list[str], *, wait: bool):
    """`visit_each_page_once` of the dark visits, in a fresh dark-scheme context of this worker."""
    context = browser.new_context(color_scheme="dark")
    try:
        page = context.new_page()
        return visit_each_page_once(
            tmp_path_factory, "dark-axe", pages, lambda path: dark_axe_visit(page, base_url + path), wait=wait
        )
    finally:
        context.close()


@pytest.fixture(scope="session")
def dark_axe_reports(site_dir, base_url, browser, tmp_path_factory) -> dict[str, list[str]]:
    """Every page once more, in the dark colour scheme (prefers-color-scheme: dark, which
    Material's palette follows): axe-core's colour rules only. Split between the xdist workers:
    each that visits the light pages helps with these too (`page_reports`)."""
    return visit_dark_pages(browser, base_url, tmp_path_factory, site_pages(site_dir), wait=True)


def summarize(reports: dict[str, PageReport], categories: tuple[str, ...]) -> str:
    bad = {p: r for p, r in reports.items() if any(c in r.problems for c in categories)}
    lines = []
    for path, r in bad.items():
        lines.append(f"{path}:")
        lines += [f"  [{c}] {line}" for c in categories for line in r.problems.get(c, [])]
    return f"{len(bad)} of {len(reports)} pages have problems:\n" + "\n".join(lines) if bad else ""
