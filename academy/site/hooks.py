"""MkDocs hook: a thin adapter between MkDocs' events and [`academy.site`][].

The work is done by plain modules that know nothing of MkDocs:

* ``on_config`` reloads the site's modules (`academy.site.reloading.reload_modules`,
  so ``mkdocs serve`` rebuilds with the code as it is now), puts the notebook
  cache in front of mkdocs-jupyter's execution (`academy.site.notebook_cache`;
  ``ACADEMY_NB_CACHE=0`` turns it off), lets ``mkdocs serve`` remember the
  pure steps of a build whose input did not change (`academy.site.memo`)
  and makes the
  build's [`academy.site.pages.Build`][], kept in the config under
  `BUILD_KEY`: everything that lasts across one build lives there;
* ``on_page_markdown`` expands the ``<!-- bench:... -->`` directives and checks
  the prose's numbers ([`page_markdown`][academy.site.pages.Build.page_markdown]);
* ``on_page_content`` puts the verified-with badge under a chapter page's title,
  Markdown or notebook ([`page_html`][academy.site.pages.Build.page_html]);
* ``on_files``, ``on_page_content`` and ``on_post_build`` also let the reader take
  the code home (`academy.site.downloads`): each tutorial's ``.ipynb``, ``.py``
  and Colab links, each excerpt's whole file, each chapter's results files;
* ``on_post_build`` rewrites the search index (`academy.site.search_index`):
  notebook pages per section, code blocks out, stop words out of queries.

A page that cannot be built ([`PageError`][academy.site.pages.PageError]) fails the
build with MkDocs' ``PluginError``.
"""

from __future__ import annotations

from academy.site import downloads, memo, notebook_cache, pages, reloading, search_index

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

BUILD_KEY = "academy_build"
PUBLISHED_KEY = "academy_published"
WORLD_KEY = "academy_world"


def _build(config) -> pages.Build:
    """This build's state; a fresh one when an event is called outside a build (a test)."""
    build = config.get(BUILD_KEY) if config is not None else None
    return build if build is not None else pages.Build()


def _src_path(page) -> str:
    return page.file.src_path if page is not None else "?"


def on_config(config, **kwargs):
    reloading.reload_modules()
    if "mkdocs-jupyter" in (config.get("plugins") or {}):
        notebook_cache.install(notebook_cache.enabled())
    config[WORLD_KEY] = memo.world()
    memo.install(world_hash=config[WORLD_KEY] if hasattr(config, "plugins") else None)
    config[BUILD_KEY] = pages.Build(nav_titles=pages.nav_titles(config.get("nav")))
    repo = downloads.repository(config.get("repo_url"), config.get("edit_uri"))
    config[PUBLISHED_KEY] = downloads.Published(repo, code=downloads.excerpt_files(config.get("docs_dir")))
    return config


def on_files(files, config, **kwargs):
    for site_path, source in config[PUBLISHED_KEY].static_files().items():
        files.append(File.generated(config, site_path, abs_src_path=str(source)))
    return files


def _remembered(step: str, text: str, page, config, compute):
    """``compute()``, remembered by `academy.site.memo` in a real build (a page, and the build's `WORLD_KEY`)."""
    world = config.get(WORLD_KEY) if config is not None else None
    if world is None or page is None:
        return compute()
    key = "\0".join([world, page.file.src_path, page.url, repr(_build(config).nav_titles), text])
    return memo.remember(step, key, compute)


def on_env(env, config=None, files=None, **kwargs):
    return memo.theme_templates(env)


def on_page_markdown(markdown, page=None, config=None, **kwargs):
    try:
        expand = lambda: _build(config).page_markdown(markdown, _src_path(page))  # noqa: E731
        return _remembered("page_markdown", markdown, page, config, expand)
    except pages.PageError as err:
        raise PluginError(str(err)) from err


def on_page_content(html, page=None, config=None, **kwargs):
    badge = lambda: _build(config).page_html(html, _src_path(page))  # noqa: E731
    html = _remembered("page_html", html, page, config, badge)
    published = config.get(PUBLISHED_KEY) if config is not None else None
    if published is not None and page is not None:  # never remembered: it notes the tutorials to write
        html = published.page_html(html, page.url, page.file.abs_src_path)
    return html


def on_post_build(config, **kwargs):
    world = config.get(WORLD_KEY)

    def notebook(source, repo):  # the .ipynb of a tutorial, remembered
        key = "\0".join([world, str(source), repr(repo), source.read_text()])
        return memo.remember("notebook", key, lambda: downloads.notebook(source, repo))

    def entries(location, title, page_html):  # a notebook page's search entries, remembered
        key = "\0".join([world, location, title, page_html])
        return memo.remember("notebook_entries", key, lambda: search_index.notebook_entries(location, title, page_html))

    config[PUBLISHED_KEY].write_notebooks(config["site_dir"], *([notebook] if world else []))
    search_index.rewrite(config["site_dir"], *([entries] if world else []))
