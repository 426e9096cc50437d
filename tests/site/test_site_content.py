"""What the hook puts on the built pages: the dashboard and the verified-with badges (no browser)."""

from __future__ import annotations

import re

from academy.bench.results import OURS, load
from academy.chapters import all_chapters

import pytest

pytestmark = pytest.mark.slow


def built(site_dir, nav_path: str):
    stem = nav_path.rsplit(".", 1)[0]
    return (site_dir / stem / "index.html").read_text()


def test_dashboard_has_every_measured_case(site_dir):
    html = (site_dir / "dashboard" / "index.html").read_text()
    expected = 0
    for ch in all_chapters():
        files = ch.results_files()
        if not files or not ch.page.is_file():
            continue
        page_link = "../" + ch.nav_path.rsplit(".", 1)[0] + "/"
        assert f'href="{page_link}"' in html, f"the dashboard does not link {ch.slug}'s page ({page_link})"
        for path in files:
            res = load(path)
            expected += len(
                {(r.sweep, tuple(r.params.items()), r.dtype, r.mode) for r in res.rows if r.provider == OURS}
            )
    rows = len(re.findall(r"<tr>\s*<td[^>]*>[A-Z0-9]+(?: ⚠ stale)?</td>", html))
    assert rows == expected, f"the dashboard shows {rows} measured cases, the results files hold {expected}"


def test_every_chapter_page_has_a_verified_badge(site_dir):
    missing = []
    for ch in all_chapters():
        if not ch.page.is_file():
            continue
        html = built(site_dir, ch.nav_path)
        if 'class="academy-verified"' not in html:
            missing.append(ch.nav_path)
    assert not missing, f"no verified-with badge on: {missing}"
