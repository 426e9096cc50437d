"""The site's own speed: a reader's first page view stays small, and the build stays fast."""

from __future__ import annotations

import os

from academy.site.pytest_site import KATEX_DONE, PageWatch

import pytest

pytestmark = pytest.mark.slow

# The landing page with every asset it loads, as the publishing host sends it: GitHub Pages (the
# workflow's target) compresses with gzip, and the search index, which grows with every section the
# search can find, compresses about fourfold. The uncompressed total is held too, more loosely.
LANDING_LIMIT_GZIP_BYTES = 600_000
LANDING_LIMIT_BYTES = 2_000_000
# The full strict build, notebooks executed, in CPU seconds of all its processes: a wall-clock
# limit failed whenever the machine was busy (234 s beside a second CI run), while CPU time is
# the build's own work (97 CPU-s on an idle 2-core machine on 2026-11-27).
BUILD_LIMIT_CPU_S = 180


def test_landing_page_weight(base_url, browser):
    """Bytes of the landing page and every asset Chromium fetches for it, on a first (cold) visit.

    Held twice: gzip-compressed, as GitHub Pages sends it, and uncompressed as
    the local server serves it. Material's search worker fetches the whole
    search index with the first page, so the index (which grows with every
    chapter and every indexed section) is most of the weight."""
    context = browser.new_context()
    watch = PageWatch(context, gzip_sizes=True)
    page = context.new_page()
    watch.attach(page)
    page.goto(base_url + "/", wait_until="networkidle")
    page.wait_for_function(KATEX_DONE, timeout=10_000)
    page.wait_for_load_state("networkidle")
    sizes, gz = dict(watch.bytes), dict(watch.gzip_bytes)
    context.close()
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:6]
    print(
        f"landing page: {total:,} bytes in {len(sizes)} requests (limit {LANDING_LIMIT_BYTES:,}); "
        f"{sum(gz.values()):,} bytes if the host compresses with gzip"
    )
    for url, size in biggest:
        print(f"  {size:>9,}  {url.split('/', 3)[-1] or '(index.html)'}")
    assert not watch.external, watch.external
    sent = sum(gz.values())
    assert sent <= LANDING_LIMIT_GZIP_BYTES, (
        f"the landing page sends {sent:,} gzip bytes, over {LANDING_LIMIT_GZIP_BYTES:,}"
    )
    assert total <= LANDING_LIMIT_BYTES, f"the landing page weighs {total:,} bytes, over {LANDING_LIMIT_BYTES:,}"


def test_build_time(site_build):
    if site_build.seconds != site_build.seconds:  # NaN: a prebuilt site (ACADEMY_SITE_DIR)
        pytest.skip("ACADEMY_SITE_DIR: the site was built beforehand, its build time is unknown")
    print(
        f"mkdocs build --strict (notebooks executed): {site_build.cpu_seconds:.1f} CPU-s, "
        f"{site_build.seconds:.1f} s on {os.cpu_count()} cores (limit {BUILD_LIMIT_CPU_S} CPU-s)"
    )
    assert site_build.cpu_seconds < BUILD_LIMIT_CPU_S


def test_search_index_holds_no_code_blocks(site_dir):
    """The hook drops listings from the search index (academy/site/search_index.py): they were
    most of the landing page's weight. Prose and inline code stay."""
    import json

    data = json.loads((site_dir / "search" / "search_index.json").read_text(encoding="utf-8"))
    texts = [doc["text"] for doc in data["docs"]]
    assert not [t for t in texts if "<pre>" in t]
    assert any("<code>" in t for t in texts)


def test_search_index_holds_no_verified_badge(site_dir):
    """A page's verified badge is status, not content: its words (torch, triton, GPU) made every
    page's first entry match questions that named them."""
    import json

    data = json.loads((site_dir / "search" / "search_index.json").read_text(encoding="utf-8"))
    badged = [doc["location"] for doc in data["docs"] if "Verified:" in doc["text"]]
    assert not badged, badged
    assert any(doc["location"] == "kernels/fused_softmax/" for doc in data["docs"]), "the page entry itself stays"
