"""Take the code home: notebooks to download, excerpts linked to their files, results files published.

Plain functions; the hook (`academy.site.hooks`) calls them.

* **Tutorials.** Each tutorial page (``docs/tutorials/<slug>.py``, executed by
  mkdocs-jupyter) offers its source twice, next to the page: the jupytext
  ``.py`` (which mkdocs-jupyter's ``include_source`` copies) and a ``.ipynb``
  made from it at build time by [`notebook`][academy.site.downloads.notebook],
  plus an "Open in Colab" link when the site knows its repository. Colab opens
  notebooks from GitHub only, so a copy of each ``.ipynb`` is committed under
  ``notebooks/`` (``python -m academy.site.downloads`` rewrites them;
  ``tests/site/test_downloads.py`` fails when one is out of date). A notebook
  run outside the repository starts with a cell that clones and installs it.
* **Excerpts.** The title of a code block that includes a file of
  ``examples/`` links to the whole file: on GitHub when ``repo_url`` is set,
  else to a copy published with the site under ``code/``.
* **Results.** Every chapter's ``examples/<slug>/results/<gpu>.json`` is
  published as ``results/<slug>/<gpu>.json`` and linked from the chapter's
  provenance block (Markdown chapters) or its results tables (tutorials).
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from academy.chapters import REPO_ROOT, all_chapters

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"  # the committed .ipynb copies Colab opens
TUTORIALS_DIR = REPO_ROOT / "docs" / "tutorials"
RESULTS_DIR = "results"  # in the built site: results/<slug>/<gpu>.json
CODE_DIR = "code"  # in the built site, without a repository to link: code/examples/...
COLAB = "https://colab.research.google.com/github"
DOWNLOADS_CLASS = "academy-downloads"
# A code block's title, as pymdownx.highlight renders `title="examples/..."`.
FILENAME_RE = re.compile(r'<span class="filename">(examples/[^<"]+?\.py)</span>')


@dataclass(frozen=True)
class Repository:
    """Where the handbook's source lives: ``repo_url`` and the branch pages link to."""

    url: str  # https://github.com/OWNER/NAME, no trailing slash
    branch: str = "main"

    def blob(self, path: str) -> str:
        """The page of one file of the repository (``path`` from its root)."""
        return f"{self.url}/blob/{self.branch}/{path}"

    @property
    def github(self) -> str | None:
        """``OWNER/NAME`` when the repository is on github.com, else None."""
        parts = urlsplit(self.url)
        path = parts.path.strip("/")
        if parts.hostname in ("github.com", "www.github.com") and path.count("/") == 1:
            return path
        return None

    def colab(self, path: str) -> str | None:
        """Colab's link to a notebook of the repository; None off GitHub (Colab reads GitHub only)."""
        return f"{COLAB}/{self.github}/blob/{self.branch}/{path}" if self.github else None


def repository(repo_url: str | None, edit_uri: str | None = None) -> Repository | None:
    """The site's repository from mkdocs.yml's ``repo_url``; the branch from ``edit_uri``
    (``edit/<branch>/docs/``), else ``main``. None when ``repo_url`` is not set."""
    if not repo_url:
        return None
    url = repo_url.strip().rstrip("/").removesuffix(".git")
    found = re.match(r"(?:edit|blob|tree)/([^/]+)/", (edit_uri or "").lstrip("/"))
    return Repository(url, found.group(1) if found else "main")


# --------------------------------------------------------------------------- notebooks


def setup_source(repo: Repository) -> str:
    """The first code cell of a downloaded notebook: clone and install the repository unless it is there."""
    folder = posixpath.basename(repo.url) or "triton-academy"
    return f'''# Outside the handbook's repository (Colab, a fresh Jupyter), this cell fetches it:
# the notebook imports its kernels and helpers from the repository's `academy` and
# `examples` packages. Linux or WSL only: Triton is published for Linux. Without a GPU,
# the kernels run on the CPU through Triton's interpreter.
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("academy") is None:
    subprocess.run(["git", "clone", "--depth", "1", "--branch", "{repo.branch}", "{repo.url}", "{folder}"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-e", "{folder}"], check=True)
    sys.path.insert(0, "{folder}")'''


def notebook(source: Path, repo: Repository | None) -> str:
    """The ``.ipynb`` text of a jupytext tutorial: its cells without outputs, with the setup
    cell ([`setup_source`][academy.site.downloads.setup_source]) after the title cell when the
    repository is known. Cell ids are numbered, so the same source always gives the same file."""
    import jupytext
    import nbformat

    nb = jupytext.read(source)
    nb.metadata.pop("jupytext", None)
    if repo is not None:
        at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        nb.cells.insert(at, nbformat.v4.new_code_cell(setup_source(repo)))
    for number, cell in enumerate(nb.cells):
        cell.id = f"{source.stem}-{number:02d}".replace("_", "-")
    return jupytext.writes(nb, fmt="ipynb")


def tutorials() -> list[Path]:
    return sorted(TUTORIALS_DIR.glob("*.py"))


def committed_notebook(source: Path) -> Path:
    return NOTEBOOKS_DIR / f"{source.stem}.ipynb"


def stale_notebooks(repo: Repository | None) -> list[str]:
    """Tutorials whose committed ``notebooks/<slug>.ipynb`` is missing or differs from the source."""
    stale = []
    for source in tutorials():
        path = committed_notebook(source)
        if not path.is_file() or path.read_text(encoding="utf-8") != notebook(source, repo):
            stale.append(source.stem)
    extra = {p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")} - {s.stem for s in tutorials()}
    return stale + sorted(f"{name} (no tutorial)" for name in extra)


def downloads_html(stem: str, repo: Repository | None) -> str:
    """The line under a tutorial's title: its ``.ipynb`` and ``.py`` next to the page, and Colab."""
    links = [
        f'<a href="{stem}.ipynb" download>notebook (.ipynb)</a>',
        f'<a href="{stem}.py" download>script (.py, jupytext)</a>',
    ]  # no <code> inside a link: its colour on the code background fails contrast in the dark scheme
    colab = repo.colab(f"notebooks/{stem}.ipynb") if repo is not None else None
    if colab:
        links.append(f'<a href="{html.escape(colab)}">Open in Colab</a>')
    return f'<p class="{DOWNLOADS_CLASS}" data-search-exclude>Take this tutorial home: {" · ".join(links)}</p>'


def insert_after_title(page_html: str, snippet: str) -> str:
    """``snippet`` right after the first ``</h1>`` (and the verified-with badge, if one follows)."""
    end = page_html.find("</h1>")
    if end < 0:
        return snippet + page_html
    end += len("</h1>")
    badge = re.match(r'\s*<p class="academy-verified".*?</p>', page_html[end:], re.S)
    if badge:
        end += badge.end()
    return page_html[:end] + "\n" + snippet + page_html[end:]


# --------------------------------------------------------------------------- excerpts and results


def link_excerpts(page_html: str, page_url: str, repo: Repository | None) -> tuple[str, set[str]]:
    """Each code block titled with a file of ``examples/`` links to that whole file.

    Returns the page and the files it links to (paths from the repository root),
    which the site must publish under ``code/`` when there is no repository."""
    linked: set[str] = set()

    def link(match: re.Match) -> str:
        path = match.group(1)
        if not (REPO_ROOT / path).is_file():
            return match.group(0)
        linked.add(path)
        if repo is not None:
            href, where = repo.blob(path), "in the repository"
        else:
            href, where = relative(f"{CODE_DIR}/{path}", page_url), "published with this site"
        # The title's own colour, underlined: the link colour on the code background falls
        # short of WCAG's 4.5:1 in the dark scheme (4.1, axe in tests/site/test_site_a11y.py).
        return (
            f'<span class="filename"><a href="{html.escape(href)}" title="The whole file, {where}" '
            f'style="color: inherit; text-decoration: underline">{html.escape(path)}</a></span>'
        )

    return FILENAME_RE.sub(link, page_html), linked


def relative(target: str, page_url: str) -> str:
    """``target`` (a path in the site) relative to the page at ``page_url`` (``kernels/x/``)."""
    base = page_url if page_url.endswith("/") else posixpath.dirname(page_url) + "/"
    return posixpath.relpath(target, base.rstrip("/") or ".")


def published_results() -> dict[str, Path]:
    """Every results file, by its path in the site (``results/<slug>/<gpu>.json``)."""
    out = {}
    for ch in all_chapters():
        for path in ch.results_files():
            out[f"{RESULTS_DIR}/{ch.slug}/{path.name}"] = path
    return out


def results_link(slug: str, name: str, from_src: str | None = None) -> str:
    """Markdown link to a published results file: relative to the Markdown source ``from_src``
    (``kernels/x.md``, which MkDocs checks and rewrites), else to a tutorial page
    (``tutorials/<slug>/``, for a notebook's output, which nothing rewrites)."""
    site_path = f"{RESULTS_DIR}/{slug}/{name}"
    href = posixpath.relpath(site_path, posixpath.dirname(from_src)) if from_src else f"../../{site_path}"
    return f"[examples/{slug}/results/{name}]({href})"  # not code: see downloads_html


EXCERPT_TITLE_RE = re.compile(r'title="(examples/[^"]+?\.py)"')


def excerpt_files(docs_dir: str | Path | None) -> set[str]:
    """Files of ``examples/`` that Markdown pages show excerpts of (``title="examples/..."``)."""
    found: set[str] = set()
    for page in Path(docs_dir).rglob("*.md") if docs_dir else ():
        found.update(p for p in EXCERPT_TITLE_RE.findall(page.read_text(encoding="utf-8")) if (REPO_ROOT / p).is_file())
    return found


@dataclass
class Published:
    """What one build publishes for the reader to take home, and the links on its pages."""

    repo: Repository | None
    code: set[str] = field(default_factory=set)  # excerpted files (paths from the repository root)
    notebooks: dict[str, Path] = field(default_factory=dict)  # page URL -> the tutorial's source

    def static_files(self) -> dict[str, Path]:
        """Files to copy into the site, by path in the site: the results files, and the excerpted
        files themselves when there is no repository to link to."""
        out = published_results()
        if self.repo is None:
            out.update({f"{CODE_DIR}/{path}": REPO_ROOT / path for path in sorted(self.code)})
        return out

    def page_html(self, page_html: str, page_url: str, src: str | None) -> str:
        """A page with its excerpts linked and, for a tutorial, its downloads under the title."""
        page_html, _ = link_excerpts(page_html, page_url, self.repo)
        if src and src.endswith(".py") and DOWNLOADS_CLASS not in page_html:
            source = Path(src)
            self.notebooks[page_url] = source
            page_html = insert_after_title(page_html, downloads_html(source.stem, self.repo))
        return page_html

    def write_notebooks(
        self, site_dir: str | Path, convert: Callable[[Path, Repository | None], str] = notebook
    ) -> None:
        """Each tutorial's ``.ipynb`` (``convert``: `notebook`, or one that remembers its results),
        next to its page (where mkdocs-jupyter copies the ``.py``)."""
        for url, source in self.notebooks.items():
            folder = Path(site_dir) / (url if url.endswith("/") else posixpath.dirname(url))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{source.stem}.ipynb").write_text(convert(source, self.repo), encoding="utf-8")


def site_repository() -> Repository | None:
    """The repository as mkdocs.yml names it (``!ENV`` settings resolved from this environment)."""
    from mkdocs.utils.yaml import yaml_load

    with open(REPO_ROOT / "mkdocs.yml", encoding="utf-8") as f:
        config = yaml_load(f)
    return repository(config.get("repo_url"), config.get("edit_uri"))


def main() -> None:
    """Rewrite the committed notebooks (``notebooks/*.ipynb``) from ``docs/tutorials/*.py``."""
    repo = site_repository()
    NOTEBOOKS_DIR.mkdir(exist_ok=True)
    for source in tutorials():
        committed_notebook(source).write_text(notebook(source, repo), encoding="utf-8")
    for path in NOTEBOOKS_DIR.glob("*.ipynb"):
        if not (TUTORIALS_DIR / f"{path.stem}.py").is_file():
            path.unlink()
    print(f"wrote {len(tutorials())} notebooks to {NOTEBOOKS_DIR.relative_to(REPO_ROOT)}/")


if __name__ == "__main__":
    main()
