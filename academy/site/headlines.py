"""A chapter's headline cases: the shapes its summary and the overview quote.

They are ``SPEC.headline`` in ``examples/<slug>/bench.py``. Both the pages
([`academy.site.pages`][]) and the prose check ([`academy.site.prose_numbers`][])
read them, so they live below both.
"""

from __future__ import annotations

import importlib

from academy.bench import render
from academy.chapters import chapter


def headline(slug: str) -> render.Headline:
    """The headline cases of ``examples/<slug>/bench.py`` (its ``SPEC.headline``); ValueError when unreadable."""
    name = chapter(slug).bench_module
    try:
        return tuple(importlib.import_module(name).SPEC.headline)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{slug}: cannot read the headline cases from {name}.SPEC: {err}") from err
