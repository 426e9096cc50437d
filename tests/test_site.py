"""The built site, opened page by page in a real browser.

Builds the site once (``mkdocs build --strict``: any warning fails), serves it
on 127.0.0.1 and visits every page with Debian's Chromium through Playwright.
On every page:

* no request leaves 127.0.0.1 (no CDN, no fonts, no analytics) and no local
  request fails;
* no console error and no uncaught page error;
* KaTeX rendered every formula (each ``.arithmatex`` holds a ``.katex``) and
  none failed (``.katex-error``);
* every code-annotation marker in the code became a rendered annotation, and
  math inside annotation tooltips (inserted when opened) is rendered too.

Screenshots of the home page, light and dark, go to ``test-artifacts/``.

The browser is Debian's ``chromium`` (``make test`` installs it), never one
downloaded by ``playwright install``. If it is missing the test fails, unless
``ACADEMY_SKIP_BROWSER=1`` says to skip the browser part.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
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

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("ACADEMY_NB_CACHE", None)  # always execute the notebooks afresh
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "the build must be warning-free:\n" + "\n".join(warnings)
    print(f"site built in {elapsed:.1f} s")
    return out


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


@pytest.fixture(scope="session")
def browser():
    if os.environ.get("ACADEMY_SKIP_BROWSER") == "1":
        pytest.skip("ACADEMY_SKIP_BROWSER=1: browser checks skipped")
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the site test needs Debian's chromium. "
            "Install it with `apt-get install -y chromium` (as root; `make test` does this), "
            "or set ACADEMY_SKIP_BROWSER=1 to skip the browser checks.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def _pages(site_dir: Path) -> list[str]:
    """URL paths of every page: each index.html under the site."""
    paths = []
    for index in sorted(site_dir.rglob("index.html")):
        rel = index.parent.relative_to(site_dir).as_posix()
        paths.append("/" if rel == "." else f"/{rel}/")
    return paths


class PageWatch:
    """Records what a page does: requests, failures, console and page errors."""

    def __init__(self, context):
        self.external: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        context.route("**/*", self._route)

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
        page.on("response", lambda resp: resp.status >= 400 and self.failed.append(f"{resp.status} {resp.url}"))

    def _failed(self, request, failure):
        if urlsplit(request.url).hostname in LOCAL_HOSTS:
            self.failed.append(f"{failure} {request.url}")


# Runs in the page once it has loaded: wait until KaTeX has had its turn.
KATEX_DONE = """() => {
  const math = document.querySelectorAll('.arithmatex');
  return [...math].every(el => el.querySelector('.katex, .katex-error'));
}"""

PAGE_FACTS = """() => ({
  arithmatex: document.querySelectorAll('.arithmatex').length,
  unrendered: [...document.querySelectorAll('.arithmatex')]
      .filter(el => !el.querySelector('.katex')).map(el => el.textContent.slice(0, 60)),
  katexErrors: [...document.querySelectorAll('.katex-error')].map(el => el.textContent.slice(0, 60)),
  annotations: document.querySelectorAll('.md-annotation').length,
})"""


def _open_annotations(page, count: int) -> list[str]:
    """Open each code annotation: Material inserts its tooltip only now, and math there must render too."""
    found = []
    markers = page.locator(".md-annotation__index")
    for i in range(count):
        markers.nth(i).click(force=True)  # force: the markers pulse, so they are never "stable"
        try:
            page.wait_for_function(KATEX_DONE, timeout=3_000)
        except Exception:
            found.append(f"math in code annotation {i + 1} was not rendered by KaTeX")
    return found


# ---------------------------------------------------------------- tests


def test_every_page(site_dir, base_url, browser):
    pages = _pages(site_dir)
    assert "/" in pages and len(pages) > 3, f"suspiciously few pages: {pages}"
    context = browser.new_context()
    watch = PageWatch(context)
    page = context.new_page()
    watch.attach(page)
    problems: dict[str, list[str]] = {}
    for path in pages:
        watch.external.clear(), watch.failed.clear(), watch.errors.clear()
        page.goto(base_url + path, wait_until="load")
        found = []
        try:
            page.wait_for_function(KATEX_DONE, timeout=10_000)
        except Exception:
            found.append("KaTeX did not render within 10 s")
        page.wait_for_load_state("networkidle")
        facts = page.evaluate(PAGE_FACTS)
        if facts["unrendered"]:
            found.append(f"math not rendered by KaTeX: {facts['unrendered']}")
        if facts["katexErrors"]:
            found.append(f"KaTeX errors: {facts['katexErrors']}")
        found += _open_annotations(page, facts["annotations"])
        html = (site_dir / path.lstrip("/") / "index.html").read_text()
        markers = len(ANNOTATION_MARKER.findall(html))
        if facts["annotations"] < markers:
            found.append(f"{markers} code-annotation markers but {facts['annotations']} rendered annotations")
        found += [f"request to another host: {url}" for url in watch.external]
        found += [f"failed request: {what}" for what in watch.failed]
        found += watch.errors
        if found:
            problems[path] = found
    context.close()
    report = "\n".join(f"{path}:\n  " + "\n  ".join(lines) for path, lines in problems.items())
    assert not problems, f"{len(problems)} of {len(pages)} pages have problems:\n{report}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_home_screenshot(site_dir, base_url, browser, scheme):
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    watch = PageWatch(context)
    page = context.new_page()
    watch.attach(page)
    page.goto(base_url + "/", wait_until="networkidle")
    page.wait_for_function(KATEX_DONE, timeout=10_000)
    palette = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    page.screenshot(path=str(ARTIFACTS / f"home-{scheme}.png"), full_page=True)
    context.close()
    assert palette == {"light": "default", "dark": "slate"}[scheme]
    assert not watch.external and not watch.errors, watch.external + watch.errors


# ---------------------------------------------------------------- links (no browser)


class _Links(__import__("html.parser").parser.HTMLParser):
    """Collects every href and every element id of one page."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(errors="replace"))
    return parser


def test_internal_links_and_anchors_resolve(site_dir):
    """MkDocs validates links in Markdown pages, but not in notebook pages,
    whose markdown cells it never sees: check every page's links in the
    built site, anchors included."""
    pages = {index: _parse(index) for index in site_dir.rglob("index.html")}
    problems = []
    for index, links in pages.items():
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            target = (index.parent / parts.path).resolve() if parts.path else index
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{index.relative_to(site_dir)}: {href} (no such file)")
            elif parts.fragment and target in pages and parts.fragment not in pages[target].ids:
                problems.append(f"{index.relative_to(site_dir)}: {href} (no such anchor)")
    assert not problems, "broken links:\n  " + "\n  ".join(sorted(set(problems)))
