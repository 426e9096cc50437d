"""The API reference (docs/reference/api.md, rendered by mkdocstrings) reads as prose.

mkdocstrings renders docstrings as Markdown, so a Sphinx role (``:func:`name```) is
printed as it stands. The modules the page renders (its ``:::`` lines) cross-reference
with Markdown instead:
``[`name`][academy.module.name]``, or ``[`academy.module`][]`` when the text is the full
name. A reference to an object the page does not show (a private helper, a module not
listed on the page, an attribute without a docstring) is plain code: the strict build
fails on a reference that resolves nowhere.
"""

from __future__ import annotations

import re

from academy.chapters import REPO_ROOT

import pytest

SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj|const):`")


def documented_modules() -> list[str]:
    """The modules the API page renders: its ``::: module`` lines."""
    page = (REPO_ROOT / "docs" / "reference" / "api.md").read_text()
    return re.findall(r"^::: ([\w.]+)\s*$", page, re.M)


def module_file(name: str):
    base = REPO_ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def test_no_sphinx_roles_in_documented_modules():
    modules = documented_modules()
    assert "academy" in modules and len(modules) > 10, modules
    found = []
    for path in map(module_file, modules):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SPHINX_ROLE.search(line):
                found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not found, "Sphinx roles print raw on the API page; use [`name`][academy.module.name]:\n" + "\n".join(found)


@pytest.mark.slow
def test_api_page_has_cross_references_and_no_raw_roles(site_dir):
    html = (site_dir / "reference" / "api" / "index.html").read_text()
    raw = re.findall(r":(?:func|class|mod|meth|data|attr|exc|obj):(?:<code>|`)[^<`]{0,60}", html)
    assert not raw, f"raw Sphinx roles on the API page: {raw[:10]}"
    links = html.count('class="autorefs autorefs-internal"')
    assert links >= 20, f"only {links} cross-references on the API page"
