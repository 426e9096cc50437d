"""The site machinery: what turns ``docs/`` and the committed results into the handbook's pages.

* `academy.site.hooks`: the MkDocs hook, a thin adapter over the modules below;
* [`academy.site.pages`][]: the ``<!-- bench:... -->`` directive language, page expansion, the badge;
* [`academy.site.notebook`][]: the tutorials' helpers (``show``, ``answer``, ``bench_table``, ``bench_plot``);
* [`academy.site.dashboard`][]: every kernel × shape × GPU on one page;
* [`academy.site.prose_numbers`][]: prose quotes no measurement the results files lack;
* [`academy.site.verified`][]: verified-with records and their badge;
* `academy.site.headlines`: a chapter's headline cases;
* `academy.site.search_index`: the search index: notebook pages per section, no code blocks, no stop words in queries;
* `academy.site.reloading`: the package's import graph; ``mkdocs serve`` reloads edited modules;
* `academy.site.notebook_cache`: the tutorials' executed output, cached by everything their kernel read;
* `academy.site.memo`: pure build steps remembered across ``mkdocs serve`` rebuilds;
* `academy.site.pytest_site`, `academy.site.pytest_verified`: the pytest plugins of the site
  tests and of the verified-with records.
"""
