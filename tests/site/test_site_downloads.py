"""Take the code home: tutorials as .ipynb and .py (and in Colab), excerpts linked to their files,
results files published (`academy.site.downloads`).

The first tests need no build; the ones marked slow read the strict build's output
(the ``site_dir`` fixture of ``academy/site/pytest_site.py``).
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from academy.chapters import DOCS_DIR, REPO_ROOT, all_chapters
from academy.site import downloads
from academy.site.downloads import Repository

import pytest

REPO = Repository("https://github.com/owner/handbook", "main")
HREF_RE = re.compile(r'href="([^"]+)"')


# --------------------------------------------------------------------------- without a build


def test_repository_from_repo_url_and_edit_uri():
    repo = downloads.repository("https://github.com/owner/handbook/", "edit/dev/docs/")
    assert repo == Repository("https://github.com/owner/handbook", "dev")
    assert repo.blob("examples/x/kernel.py") == "https://github.com/owner/handbook/blob/dev/examples/x/kernel.py"
    assert (
        repo.colab("notebooks/a.ipynb")
        == "https://colab.research.google.com/github/owner/handbook/blob/dev/notebooks/a.ipynb"
    )
    assert downloads.repository("https://github.com/owner/handbook.git").branch == "main"
    assert downloads.repository(None) is None and downloads.repository("") is None
    assert downloads.repository("https://gitlab.com/owner/handbook").colab("notebooks/a.ipynb") is None


def test_downloads_line_omits_colab_without_a_repository():
    with_repo, without = downloads.downloads_html("gelu", REPO), downloads.downloads_html("gelu", None)
    for line in (with_repo, without):
        assert 'href="gelu.ipynb"' in line and 'href="gelu.py"' in line
    assert "colab.research.google.com/github/owner/handbook/blob/main/notebooks/gelu.ipynb" in with_repo
    assert "Colab" not in without


def test_downloads_go_after_the_title_and_the_badge():
    page = '<h1 id="t">T</h1>\n<p class="academy-verified">Verified</p>\n<p>Text.</p>'
    out = downloads.insert_after_title(page, "<p>X</p>")
    assert out.index("Verified") < out.index("<p>X</p>") < out.index("Text.")


def test_excerpt_titles_link_the_whole_file():
    path = "examples/vector_add/kernel.py"
    page = f'<div class="highlight"><span class="filename">{path}</span><pre>...</pre></div>'
    linked, files = downloads.link_excerpts(page, "kernels/vector_add/", REPO)
    assert files == {path} and f'<a href="{REPO.blob(path)}"' in linked
    linked, _ = downloads.link_excerpts(page, "kernels/vector_add/", None)
    assert f'<a href="../../code/{path}"' in linked  # the copy published with the site
    missing = page.replace(path, "examples/vector_add/nothing.py")
    assert downloads.link_excerpts(missing, "kernels/vector_add/", REPO)[0] == missing


def test_notebook_is_the_tutorial_with_a_setup_cell():
    import nbformat

    source = DOCS_DIR / "tutorials" / "first_kernel.py"
    text = downloads.notebook(source, REPO)
    assert text == downloads.notebook(source, REPO), "the same source must give the same file"
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "git" in nb.cells[1].source and REPO.url in nb.cells[1].source
    assert not any(cell.get("outputs") for cell in nb.cells)
    plain = nbformat.reads(downloads.notebook(source, None), as_version=4)
    assert len(plain.cells) == len(nb.cells) - 1


def test_committed_notebooks_match_the_tutorials():
    """Colab opens notebooks from GitHub only: notebooks/<slug>.ipynb is each tutorial as an .ipynb."""
    stale = downloads.stale_notebooks(downloads.site_repository())
    assert not stale, f"notebooks/ is out of date for {stale}: run `.venv/bin/python -m academy.site.downloads`"


# --------------------------------------------------------------------------- the built site


def page_html(site_dir: Path, url: str) -> str:
    return (site_dir / url / "index.html").read_text(encoding="utf-8")


def resolve(site_dir: Path, page_url: str, href: str) -> Path:
    """The file a relative link of the page at ``page_url`` points to."""
    return site_dir / posixpath.normpath(posixpath.join(page_url, unquote(urlsplit(href).path)))


@pytest.mark.slow
def test_every_tutorial_page_offers_its_notebook_script_and_colab(site_dir):
    import nbformat

    repo = downloads.site_repository()
    problems = []
    for source in downloads.tutorials():
        url = f"tutorials/{source.stem}/"
        html = page_html(site_dir, url)
        line = re.search(rf'<p class="{downloads.DOWNLOADS_CLASS}".*?</p>', html, re.S)
        if not line:
            problems.append(f"{url}: no downloads line")
            continue
        hrefs = HREF_RE.findall(line.group(0))
        for name in (f"{source.stem}.ipynb", f"{source.stem}.py"):
            if name not in hrefs:
                problems.append(f"{url}: no link to {name}")
            elif not resolve(site_dir, url, name).is_file():
                problems.append(f"{url}: {name} is not in the built site")
        ipynb = resolve(site_dir, url, f"{source.stem}.ipynb")
        if ipynb.is_file():
            nbformat.validate(nbformat.read(ipynb, as_version=4))
        if resolve(site_dir, url, f"{source.stem}.py").is_file():
            assert resolve(site_dir, url, f"{source.stem}.py").read_text() == source.read_text()
        colab = [h for h in hrefs if "colab.research.google.com" in h]
        if repo is None or repo.github is None:
            if colab:
                problems.append(f"{url}: a Colab link without a GitHub repository")
        elif colab != [repo.colab(f"notebooks/{source.stem}.ipynb")]:
            problems.append(f"{url}: Colab link {colab}")
        elif not downloads.committed_notebook(source).is_file():
            problems.append(f"{url}: Colab opens notebooks/{source.stem}.ipynb, which is not committed")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_excerpt_links_its_whole_file(site_dir):
    repo = downloads.site_repository()
    problems, linked = [], 0
    for page in sorted(DOCS_DIR.glob("kernels/*.md")):
        url = f"kernels/{page.stem}/"
        html = page_html(site_dir, url)
        titles = set(re.findall(r'title="(examples/[^"]+?\.py)"', page.read_text(encoding="utf-8")))
        for path in sorted(titles):
            links = re.findall(rf'<span class="filename"><a href="([^"]+)"[^>]*>{re.escape(path)}</a></span>', html)
            if not links:
                problems.append(f"{url}: the excerpt titled {path} links nothing")
                continue
            linked += 1
            expected = repo.blob(path) if repo else None
            for href in set(links):
                if expected and href != expected:
                    problems.append(f"{url}: {path} links {href}, not {expected}")
                if not expected and resolve(site_dir, url, href).read_bytes() != (REPO_ROOT / path).read_bytes():
                    problems.append(f"{url}: {path} links {href}, which is not a copy of the file")
        unlinked = re.findall(r'<span class="filename">(examples/[^<]+)</span>', html)
        if unlinked:
            problems.append(f"{url}: unlinked excerpt titles {sorted(set(unlinked))}")
    assert linked > 20, f"only {linked} excerpt files linked: is the title rendering still the same?"
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_chapter_links_its_results_files(site_dir):
    problems, checked = [], 0
    for ch in all_chapters():
        if not ch.results_files() or not ch.page.is_file():
            continue
        url = ch.nav_path.rsplit(".", 1)[0] + "/"
        html = page_html(site_dir, url)
        for path in ch.results_files():
            site_path = f"{downloads.RESULTS_DIR}/{ch.slug}/{path.name}"
            hrefs = [h for h in HREF_RE.findall(html) if h.endswith(site_path)]
            if not hrefs:
                problems.append(f"{url}: no link to {site_path}")
                continue
            for href in set(hrefs):
                target = resolve(site_dir, url, href)
                if not target.is_file():
                    problems.append(f"{url}: {href} does not resolve in the built site")
                elif json.loads(target.read_text()) != json.loads(path.read_text()):
                    problems.append(f"{url}: {href} is not {path.relative_to(REPO_ROOT)}")
                checked += 1
    assert checked >= 10, f"only {checked} results links checked"
    assert not problems, "\n".join(problems)
