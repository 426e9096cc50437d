"""The site machinery: what turns ``docs/`` and the committed results into the handbook's pages.

* :mod:`academy.site.hooks`: the MkDocs hook, a thin adapter over the modules below;
* :mod:`academy.site.pages`: the ``<!-- bench:... -->`` directive language, page expansion, the badge;
* :mod:`academy.site.notebook`: the tutorials' helpers (``show``, ``answer``, ``bench_table``, ``bench_plot``);
* :mod:`academy.site.dashboard`: every kernel × shape × GPU on one page;
* :mod:`academy.site.prose_numbers`: prose quotes no measurement the results files lack;
* :mod:`academy.site.verified`: verified-with records and their badge;
* :mod:`academy.site.headlines`: a chapter's headline cases;
* :mod:`academy.site.search_index`: the search index without code blocks;
* :mod:`academy.site.reloading`: the package's import graph; ``mkdocs serve`` reloads edited modules;
* :mod:`academy.site.pytest_site`, :mod:`academy.site.pytest_verified`: the pytest plugins of the site
  tests and of the verified-with records.
"""
