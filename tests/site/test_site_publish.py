"""The built site as it is published: under the path of its ``site_url``, with a sitemap and a repository link.

GitHub Pages serves a project site under a sub-path (``https://OWNER.github.io/REPO/``) and
answers a missing page with the site's ``404.html``, whose links Material makes absolute
with ``site_url``. These tests serve the built site the same way, from a parent folder,
and check that the 404 page and every asset load there; that ``sitemap.xml`` lists every
page; and that the repository link fetches nothing from GitHub.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

from academy.chapters import REPO_ROOT
from academy.site.pytest_site import KATEX_DONE, PageWatch, site_pages

import pytest

pytestmark = pytest.mark.slow

SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@pytest.fixture(scope="module")
def config() -> dict:
    """mkdocs.yml as the build saw it (``!ENV`` settings resolved from this environment)."""
    from mkdocs.utils.yaml import yaml_load

    with open(REPO_ROOT / "mkdocs.yml") as f:
        return yaml_load(f)


@pytest.fixture(scope="module")
def sub_path(config) -> str:
    """The path part of ``site_url``, ``/triton-academy/`` by default."""
    path = urlsplit(config["site_url"]).path
    return path if path.endswith("/") else path + "/"


def test_default_site_url_has_a_sub_path(config, sub_path):
    """The default publishes under a path, so the sub-path tests below test one."""
    if not os.environ.get("ACADEMY_SITE_URL"):
        assert sub_path not in ("", "/"), f"site_url {config['site_url']} has no path"


def test_sitemap_lists_every_page(site_dir, config):
    locs = [el.text for el in ET.parse(site_dir / "sitemap.xml").getroot().iter(f"{SITEMAP_NS}loc")]
    site_url = config["site_url"].rstrip("/") + "/"
    expected = {site_url + path.lstrip("/") for path in site_pages(site_dir)}
    assert len(locs) == len(set(locs)), "sitemap.xml lists a page twice"
    assert set(locs) == expected, (
        f"sitemap.xml misses {sorted(expected - set(locs))} and lists unknown {sorted(set(locs) - expected)}"
    )


ROOTED = re.compile(r'\b(?:href|src)="(/[^/"][^"]*)"')


def test_rooted_links_stay_under_the_site_path(site_dir, sub_path):
    """A link that starts with ``/`` (the 404 page's, made absolute by Material) must start
    with the site's path: ``/assets/...`` would be another site's assets on GitHub Pages."""
    bad = []
    for html in sorted(site_dir.rglob("*.html")):
        for link in ROOTED.findall(html.read_text(errors="replace")):
            if not link.startswith(sub_path):
                bad.append(f"{html.relative_to(site_dir)}: {link}")
    assert not bad, f"links outside {sub_path}:\n  " + "\n  ".join(bad[:40])


def test_repository_link_without_github_fetch(site_dir, config):
    """The header links the repository, without Material's ``data-md-component="source"``,
    whose script would fetch stars and forks from api.github.com (overrides/partials/source.html)."""
    html = (site_dir / "index.html").read_text()
    assert f'href="{config["repo_url"]}"' in html, "no repository link in the header"
    assert 'data-md-component="source"' not in html, "the repository link would fetch its facts from GitHub"
    assert "/edit/" in (site_dir / "kernels" / "fused_softmax" / "index.html").read_text(), "no edit link"


def _serve_under(site_dir: Path, sub_path: str, root: Path):
    """An HTTP server over ``root`` with the site at ``sub_path``; a missing file under it gets
    the site's 404.html with status 404, as GitHub Pages answers."""
    mount = root / sub_path.strip("/") if sub_path.strip("/") else root
    if mount != root:
        mount.parent.mkdir(parents=True, exist_ok=True)
        mount.symlink_to(site_dir, target_is_directory=True)
    not_found = (site_dir / "404.html").read_bytes()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_error(self, code, message=None, explain=None):
            if code != 404 or not self.path.startswith(sub_path):
                return super().send_error(code, message, explain)
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(not_found)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(not_found)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# Material's stylesheet makes the header sticky and its script defines document$:
# both are false when the page's assets did not load.
STYLED_AND_SCRIPTED = """() => ({
  header: getComputedStyle(document.querySelector('.md-header')).position,
  script: typeof document$ !== 'undefined',
  home: document.querySelector('a.md-logo, a.md-header__button.md-logo')?.href,
  sheets: [...document.styleSheets].filter(s => s.href).map(s => s.href),
})"""


@pytest.mark.parametrize("what", ["404", "home"])
def test_site_works_under_its_sub_path(site_dir, sub_path, browser, tmp_path, what):
    server = _serve_under(site_dir, sub_path, tmp_path / "root")
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    url = origin + sub_path + ("no/such/page/" if what == "404" else "")
    try:
        context = browser.new_context()
        watch = PageWatch(context)
        page = context.new_page()
        watch.attach(page)
        response = page.goto(url, wait_until="load")
        page.wait_for_function(KATEX_DONE, timeout=10_000)
        page.wait_for_load_state("networkidle")
        facts = page.evaluate(STYLED_AND_SCRIPTED)
        context.close()
    finally:
        server.shutdown()
        server.server_close()
    assert response.status == (404 if what == "404" else 200)
    # The 404 page's own status is expected; every other request must succeed.
    failed = [f for f in watch.failed if not f.endswith(url)]
    # Chromium logs the main document's 404 as a console error too; a failed asset shows in `failed`.
    errors = [e for e in watch.errors if not (what == "404" and "status of 404" in e)]
    assert not failed, f"requests failed under {sub_path}: {failed}"
    assert not watch.external, f"requests to other hosts: {watch.external}"
    assert not errors, errors
    assert facts["header"] == "sticky", f"Material's stylesheet did not apply under {sub_path}: {facts}"
    assert facts["script"], f"Material's script did not run under {sub_path}: {facts}"
    assert facts["home"] == origin + sub_path, f"the logo links {facts['home']}, not the site's home"
    assert all(urlsplit(s).path.startswith(sub_path) for s in facts["sheets"]), facts["sheets"]
