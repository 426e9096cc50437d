"""The handbook's conventions, checked (docs/contributing.md explains them).

* every chapter has its package, bench spec, tests, page and nav entry;
* every ``--8<-- "path:section"`` include on a page names a section that
  exists exactly once in that file;
* every code annotation ``# (N)!`` in an included section is explained by item
  ``N.`` of the ordered list right after the include, and every item has its
  marker (Material's code-annotation syntax);
* every python fence is either exactly ```` ```python ```` (run by
  pytest-codeblocks) or carries attributes and holds only includes;
* section markers in ``examples/`` are closed and properly nested;
* ``examples/`` holds only packages, and no tutorial's code lives in ``academy/``.

The parsing helpers are plain functions; the ``test_helper_*`` tests feed them
planted violations so the checks are known to be able to fail.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from academy.chapters import DOCS_DIR, EXAMPLES_DIR, REPO_ROOT, Chapter, all_chapters

import pytest
import yaml

# ---------------------------------------------------------------- parsing helpers

SECTION_RE = re.compile(
    r"(?i)(?<![;-])-+8<-+[ \t]+\[[ \t]*(?P<kind>start|end)[ \t]*:[ \t]*(?P<name>[a-z][-_0-9a-z]*)[ \t]*\]"
)
INCLUDE_RE = re.compile(r"""^[ \t]*(?P<escape>;*)-+8<-+[ \t]+(?P<q>["'])(?P<target>.+?)(?P=q)[ \t]*$""")
MARKER_RE = re.compile(r"#\s*\((\d+)\)!")
LIST_ITEM_RE = re.compile(r"^(\d+)\.[ \t]+\S")
FENCE_OPEN_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass
class Fence:
    indent: str
    ticks: str
    info: str  # everything after the backticks, stripped: "python", 'python title="x"'
    open_line: int  # 1-based line number of the opening fence
    close_line: int  # 1-based line number of the closing fence
    body: list[str] = field(default_factory=list)

    @property
    def language(self) -> str:
        return self.info.split()[0].lstrip("{.") if self.info else ""


@dataclass
class Section:
    name: str
    start: int  # 1-based line of the start marker
    end: int  # 1-based line of the end marker
    body: list[str]


def parse_fences(text: str) -> list[Fence]:
    """Top-level fenced blocks of a Markdown page (indented ones included).

    A fence closes at the first line (any indentation) that starts with at
    least as many of the same fence characters and has nothing else on it,
    so a ```` block may hold ``` lines. An unclosed fence raises ValueError.
    """
    lines = text.splitlines()
    fences: list[Fence] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN_RE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks = m["ticks"]
        fence = Fence(m["indent"], ticks, m["info"].strip(), i + 1, -1)
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(ticks) and set(stripped) == {ticks[0]}:
                break
            fence.body.append(lines[j])
            j += 1
        else:
            raise ValueError(f"fence opened on line {i + 1} is never closed")
        fence.close_line = j + 1
        fences.append(fence)
        i = j + 1
    return fences


def parse_sections(source: str) -> tuple[dict[str, list[Section]], list[str]]:
    """Named ``--8<--`` sections of a source file, and the nesting errors found."""
    sections: dict[str, list[Section]] = {}
    errors: list[str] = []
    stack: list[tuple[str, int]] = []
    lines = source.splitlines()
    for number, line in enumerate(lines, start=1):
        m = SECTION_RE.search(line)
        if not m:
            continue
        kind, name = m["kind"].lower(), m["name"]
        if kind == "start":
            if any(open_name == name for open_name, _ in stack):
                errors.append(f"line {number}: section {name!r} started again before its end")
            stack.append((name, number))
            continue
        if not stack:
            errors.append(f"line {number}: end of {name!r} without a start")
        elif stack[-1][0] != name:
            if any(open_name == name for open_name, _ in stack):
                errors.append(
                    f"line {number}: end of {name!r} while {stack[-1][0]!r} (line {stack[-1][1]}) "
                    "is still open: sections must nest"
                )
                while stack and stack[-1][0] != name:
                    stack.pop()
                start = stack.pop()[1]
                sections.setdefault(name, []).append(Section(name, start, number, lines[start : number - 1]))
            else:
                errors.append(f"line {number}: end of {name!r} without a start")
        else:
            start = stack.pop()[1]
            sections.setdefault(name, []).append(Section(name, start, number, lines[start : number - 1]))
    for name, number in stack:
        errors.append(f"line {number}: section {name!r} is never closed")
    for name, found in sections.items():
        if len(found) > 1:
            errors.append(f"section {name!r} is defined {len(found)} times (lines {[s.start for s in found]})")
    return sections, errors


def parse_include(line: str) -> tuple[str, str | None] | None:
    """``(path, section)`` for an include line, None for anything else (escaped includes too).

    Raises ValueError for an include by line numbers, which the conventions forbid.
    """
    m = INCLUDE_RE.match(line)
    if not m or m["escape"]:
        return None
    target = m["target"].strip()
    path, sep, tail = target.rpartition(":")
    if sep and re.fullmatch(r"(?i)[a-z][-_0-9a-z]*", tail) and path:
        return path, tail
    if sep and re.fullmatch(r"[-0-9:,]+", tail) and path:
        raise ValueError(f"{line.strip()}: include sections by name, never by line number")
    return target, None


def annotation_markers(lines: list[str]) -> list[int]:
    return [int(n) for line in lines for n in MARKER_RE.findall(line)]


def list_after(lines: list[str], close_index: int, indent: str) -> list[int]:
    """Item numbers of the ordered list that directly follows line ``close_index`` (0-based).

    Blank lines may precede the list; items are at the fence's indentation and
    continuation lines are indented further. Anything else ends the list.
    """
    numbers: list[int] = []
    i = close_index + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        body = line[len(indent) :] if line.startswith(indent) else None
        if body is None:
            break
        m = LIST_ITEM_RE.match(body)
        if m:
            numbers.append(int(m[1]))
        elif numbers and body[:1] in (" ", "\t"):
            pass  # continuation of the current item
        else:
            break
        i += 1
    return numbers


def check_annotations(markers: list[int], items: list[int]) -> list[str]:
    """Problems between the markers of an included block and the list after it."""
    if not markers:
        return []
    problems = []
    if len(set(markers)) != len(markers):
        duplicates = sorted({n for n in markers if markers.count(n) > 1})
        problems.append(f"markers used more than once: {duplicates}")
    wanted = list(range(1, max(markers) + 1))
    if sorted(set(markers)) != wanted:
        problems.append(f"markers {sorted(set(markers))} are not numbered 1..{max(markers)}")
    if not items:
        problems.append(f"markers {sorted(set(markers))} but no ordered list right after the block")
    elif items != list(range(1, len(items) + 1)):
        problems.append(f"list items numbered {items}: write them 1., 2., 3. ... in order")
    missing = sorted(set(markers) - set(items))
    extra = sorted(set(items) - set(markers))
    if items and missing:
        problems.append(f"markers without an explanation: {missing}")
    if extra:
        problems.append(f"explanations without a marker: {extra}")
    return problems


def check_python_fence(fence: Fence) -> str | None:
    """Why this python fence breaks the runnable-or-include rule, or None."""
    includes = [line for line in fence.body if line.strip() and INCLUDE_RE.match(line)]
    if fence.info == "python":
        if includes:
            return "a runnable ```python block cannot hold --8<-- includes (pytest-codeblocks does not expand them)"
        return None
    others = [line for line in fence.body if line.strip() and not INCLUDE_RE.match(line)]
    if others or not includes:
        return (
            f"```{fence.info}: a python fence with attributes is not run by pytest-codeblocks, "
            "so it may hold only --8<-- include lines; make it exactly ```python to run it"
        )
    return None


class _AnyTagLoader(yaml.SafeLoader):
    """Reads mkdocs.yml without resolving its !ENV / !!python/name tags."""


_AnyTagLoader.add_multi_constructor("", lambda loader, suffix, node: None)
_AnyTagLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_paths(nav) -> list[str]:
    """Every page path named in a mkdocs ``nav`` tree."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_paths(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_paths(value)]
    return []


# ---------------------------------------------------------------- the project

PAGES = sorted(DOCS_DIR.rglob("*.md"))
KERNEL_FILES = sorted(EXAMPLES_DIR.glob("*/*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def _mkdocs_nav() -> list[str]:
    config = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(), Loader=_AnyTagLoader)
    return nav_paths(config.get("nav", []))


CHAPTERS = all_chapters()


@pytest.mark.parametrize("slug", [c.slug for c in CHAPTERS] or [None])
def test_chapter_has_every_part(slug):
    """A chapter's page is docs/kernels/<slug>.md, or docs/tutorials/<slug>.py
    when a Learn tutorial owns the kernel."""
    if slug is None:
        pytest.skip("no chapter under examples/ yet")
    chapter = Chapter(slug)
    missing = [
        _rel(p)
        for p in (
            EXAMPLES_DIR / slug / "__init__.py",
            EXAMPLES_DIR / slug / "kernel.py",
            EXAMPLES_DIR / slug / "bench.py",
            chapter.page,
        )
        if not p.is_file()
    ]
    if not any(chapter.tests_dir.rglob("test_*.py")):
        missing.append(_rel(chapter.tests_dir / "test_*.py"))
    assert not missing, f"chapter {slug!r} is missing: {', '.join(missing)}"
    assert chapter.nav_path in _mkdocs_nav(), f"mkdocs.yml nav has no entry {chapter.nav_path}"


@pytest.mark.parametrize("path", KERNEL_FILES, ids=_rel)
def test_sections_are_closed_and_nested(path):
    _, errors = parse_sections(path.read_text())
    assert not errors, f"{_rel(path)}:\n  " + "\n  ".join(errors)


def _page_includes(page: Path):
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        try:
            parsed = parse_include(line)
        except ValueError as err:
            yield number, None, str(err)
            continue
        if parsed:
            yield number, parsed, None


def _resolve(path: str, section: str | None) -> tuple[list[str] | None, str | None]:
    """Lines of the included text, or an error message."""
    file = REPO_ROOT / path
    if not file.is_file():
        return None, f"{path} does not exist"
    source = file.read_text()
    if section is None:
        return source.splitlines(), None
    sections, _ = parse_sections(source)
    found = sections.get(section, [])
    if len(found) != 1:
        names = ", ".join(sorted(sections)) or "none"
        return None, f"{path} has section {section!r} {len(found)} times (sections: {names})"
    return found[0].body, None


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_includes_resolve(page):
    problems = []
    for number, target, error in _page_includes(page):
        if error:
            problems.append(f"line {number}: {error}")
            continue
        _, error = _resolve(*target)
        if error:
            problems.append(f"line {number}: {error}")
    assert not problems, f"{_rel(page)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_annotations_match_their_lists(page):
    lines = page.read_text().splitlines()
    problems = []
    for fence in parse_fences(page.read_text()):
        markers: list[int] = []
        for line in fence.body:
            try:
                target = parse_include(line)
            except ValueError:
                continue  # reported by test_includes_resolve
            if target:
                body, error = _resolve(*target)
                markers += annotation_markers(body or [])
        items = list_after(lines, fence.close_line - 1, fence.indent)
        for problem in check_annotations(markers, items):
            problems.append(f"block at line {fence.open_line}: {problem}")
    assert not problems, f"{_rel(page)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_python_fences_are_runnable_or_includes(page):
    problems = []
    for fence in parse_fences(page.read_text()):
        if fence.language in ("python", "py") or fence.info.startswith("python"):
            if fence.language == "py":
                problems.append(f"line {fence.open_line}: write ```python, not ```py")
                continue
            problem = check_python_fence(fence)
            if problem:
                problems.append(f"line {fence.open_line}: {problem}")
    assert not problems, f"{_rel(page)}:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------- the helpers can fail

GOOD_KERNEL = """\
# --8<-- [start:outer]
x = 1
# --8<-- [start:inner]
y = 2  # (1)!
z = 3  # (2)!
# --8<-- [end:inner]
# --8<-- [end:outer]
"""


def test_helper_sections_good():
    sections, errors = parse_sections(GOOD_KERNEL)
    assert errors == []
    assert set(sections) == {"outer", "inner"}
    assert sections["inner"][0].body == ["y = 2  # (1)!", "z = 3  # (2)!"]
    assert annotation_markers(sections["inner"][0].body) == [1, 2]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("# --8<-- [start:a]\nx = 1\n", "never closed"),
        ("x = 1\n# --8<-- [end:a]\n", "without a start"),
        ("# --8<-- [start:a]\n# --8<-- [start:b]\n# --8<-- [end:a]\n# --8<-- [end:b]\n", "must nest"),
        ("# --8<-- [start:a]\n# --8<-- [end:a]\n# --8<-- [start:a]\n# --8<-- [end:a]\n", "defined 2 times"),
        ("# --8<-- [start:a]\n# --8<-- [start:a]\n# --8<-- [end:a]\n# --8<-- [end:a]\n", "started again"),
    ],
)
def test_helper_sections_planted_errors(source, expected):
    _, errors = parse_sections(source)
    assert any(expected in e for e in errors), errors


def test_helper_escaped_markers_are_not_sections():
    sections, errors = parse_sections("text `# ;--8<-- [start:a]` in prose\n")
    assert sections == {} and errors == []


def test_helper_include_parsing():
    assert parse_include('--8<-- "examples/a/kernel.py:forward_kernel"') == ("examples/a/kernel.py", "forward_kernel")
    assert parse_include('    --8<-- "examples/a/bench.py"') == ("examples/a/bench.py", None)
    assert parse_include(';--8<-- "examples/a/kernel.py:x"') is None  # escaped: shown, not included
    assert parse_include('see --8<-- "x.py:y"') is None  # not alone on its line
    with pytest.raises(ValueError, match="never by line number"):
        parse_include('--8<-- "examples/a/kernel.py:10:20"')


PAGE = """\
Intro.

```python title="kernel.py"
--8<-- "k.py:s"
```

1. first
   continued
2. second

After.

````markdown
```python
print("inside an example")
```
````
"""


def test_helper_fences_and_lists():
    fences = parse_fences(PAGE)
    assert [(f.info, f.open_line, f.close_line) for f in fences] == [
        ('python title="kernel.py"', 3, 5),
        ("markdown", 13, 17),
    ]
    assert fences[1].body[0] == "```python"  # the inner fence is content, not a fence
    assert list_after(PAGE.splitlines(), fences[0].close_line - 1, "") == [1, 2]
    with pytest.raises(ValueError, match="never closed"):
        parse_fences("```python\nx = 1\n")


def test_helper_list_in_a_tab():
    page = '=== "Tab"\n\n    ```python title="x"\n    --8<-- "k.py:s"\n    ```\n\n    1. one\n    2. two\n\nafter\n'
    fence = parse_fences(page)[0]
    assert fence.indent == "    "
    assert list_after(page.splitlines(), fence.close_line - 1, fence.indent) == [1, 2]


@pytest.mark.parametrize(
    "markers, items, expected",
    [
        ([1, 2], [1, 2], None),
        ([], [1, 2], None),  # a block without annotations may be followed by any list
        ([1, 2], [], "no ordered list"),
        ([1, 2, 3], [1, 2], "without an explanation: [3]"),
        ([1], [1, 2], "without a marker: [2]"),
        ([1, 3], [1, 2, 3], "not numbered 1..3"),
        ([1, 1], [1], "more than once"),
        ([1, 2], [1, 3], "in order"),
    ],
)
def test_helper_annotation_check(markers, items, expected):
    problems = check_annotations(markers, items)
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "fence_text, ok",
    [
        ("```python\nprint(1)\n```\n", True),
        ('```python title="k.py"\n--8<-- "k.py:s"\n```\n', True),
        ('```python title="k.py"\nprint(1)\n```\n', False),  # attributes: never run, so never tested
        ('```python\n--8<-- "k.py:s"\n```\n', False),  # runnable but not expanded by pytest-codeblocks
        ('```python hl_lines="2"\n--8<-- "k.py:s"\nx = 1\n```\n', False),
    ],
)
def test_helper_python_fence_rule(fence_text, ok):
    (fence,) = parse_fences(fence_text)
    assert (check_python_fence(fence) is None) == ok


def test_helper_nav_paths():
    config = yaml.load(
        "plugins:\n  - x:\n      a: !ENV [A, false]\n      b: !!python/name:os.path\n"
        "nav:\n  - Home: index.md\n  - Kernels:\n      - A: kernels/a.md\n  - b.md\n",
        Loader=_AnyTagLoader,
    )
    assert nav_paths(config["nav"]) == ["index.md", "kernels/a.md", "b.md"]


# ---------------------------------------------------------------- tutorials

TUTORIALS = sorted((DOCS_DIR / "tutorials").glob("*.py"))
_TEST_SOURCES = "\n".join(p.read_text() for p in (REPO_ROOT / "tests").rglob("test_*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=_rel)
def test_tutorial_ends_with_tested_exercises(path):
    """Every tutorial ends with two or three exercises; the code answers are
    real sections of real modules, and some test imports each module."""
    from academy.site.notebook import section

    text = path.read_text()
    assert "# ## Exercises" in text, f"{_rel(path)} has no '## Exercises' section"
    exercises = re.findall(r"^# \*\*(\d+)\.", text[text.index("# ## Exercises") :], re.M)
    assert len(exercises) >= 2, f"{_rel(path)}: {len(exercises)} exercise(s), expected two or three"
    refs = re.findall(r'answer\(\s*"([^"]+)"', text)
    assert refs, f"{_rel(path)}: no exercise answer is shown with academy.site.notebook.answer"
    for ref in refs:
        section(ref)  # raises if the section is missing
        module = ref.partition(":")[0].removesuffix(".py").replace("/", ".")
        package, _, name = module.rpartition(".")
        imported = module in _TEST_SOURCES or re.search(
            rf"from {re.escape(package)} import [^\n]*\b{name}\b", _TEST_SOURCES
        )
        assert imported, f"{_rel(path)}: no test imports {module} (answer {ref})"


@pytest.mark.parametrize("path", TUTORIALS, ids=_rel)
def test_tutorial_markdown_uses_no_material_blocks(path):
    """Notebook markdown is rendered by nbconvert, not Python-Markdown: an
    admonition or a collapsed block would show as raw '???' text."""
    bad = [n for n, line in enumerate(path.read_text().splitlines(), 1) if re.match(r"^# (\?\?\?|!!!) ", line)]
    assert not bad, f"{_rel(path)}: Material block syntax on lines {bad}; use <details> HTML"


def test_every_test_lives_in_a_chapter_tutorial_or_infrastructure_folder():
    """tests/<slug>/ for a chapter or a tutorial, tests/academy/ and tests/site/ for the machinery."""
    tests = REPO_ROOT / "tests"
    allowed = {c.slug for c in CHAPTERS} | {p.stem for p in TUTORIALS} | {"academy", "site"}
    flat = sorted(p.name for p in tests.glob("test_*.py"))
    unknown = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name not in allowed | {"__pycache__"})
    assert not flat, f"test files directly under tests/: {flat}; move each into its chapter's folder"
    assert not unknown, f"tests/ folders named after no chapter or tutorial: {unknown}"


# ---------------------------------------------------------------- where code lives


def imported_modules(source: str, package: str, modules: set[str]) -> set[str]:
    """The modules of ``package`` (dotted names in ``modules``) that ``source`` imports, anywhere in it.

    ``from academy import asm`` imports ``academy.asm`` when that is a module,
    else the package ``academy`` itself; relative imports are left out.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name == package or name.startswith(package + "."):
                found.add(name)
    return found


def tutorial_only_modules(importers: dict[str, set[str]], tutorial_slugs: set[str]) -> list[str]:
    """Modules imported only from tutorials' own files: their page, ``examples/<t>/`` or ``tests/<t>/``.

    Such a module is a tutorial's code and belongs in ``examples/<t>/``; a
    module something else imports (the harness, a chapter, the site) stays.
    """

    def tutorial_side(path: str) -> bool:
        parts = Path(path).parts
        return parts[:2] == ("docs", "tutorials") or (
            len(parts) > 2 and parts[0] in ("examples", "tests") and parts[1] in tutorial_slugs
        )

    return sorted(module for module, files in importers.items() if files and all(map(tutorial_side, files)))


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_examples_holds_only_packages():
    """One package per chapter or tutorial (or code several of them share); no loose modules, no learn_answers."""
    loose = sorted(p.name for p in EXAMPLES_DIR.glob("*.py") if p.name != "__init__.py")
    not_packages = sorted(
        p.name
        for p in EXAMPLES_DIR.iterdir()
        if p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").is_file()
    )
    assert not (EXAMPLES_DIR / "learn_answers").exists(), (
        "examples/learn_answers/ must stay gone: a tutorial's answers are examples/<tutorial>/answers.py"
    )
    assert not loose, f"modules loose in examples/: {loose}; move each into the package of the chapter it serves"
    assert not not_packages, f"folders of examples/ without an __init__.py: {not_packages}"


def test_no_tutorial_code_in_academy():
    """academy/ is the harness and the site machinery; a module only tutorials use lives in examples/<tutorial>/."""
    academy = sorted((REPO_ROOT / "academy").rglob("*.py"))
    modules = {_module_name(p) for p in academy}
    sources = [
        *academy,
        *EXAMPLES_DIR.rglob("*.py"),
        *(REPO_ROOT / "tests").rglob("*.py"),
        *TUTORIALS,
        *REPO_ROOT.glob("*.py"),
    ]
    importers: dict[str, set[str]] = {}
    for path in sources:
        for module in imported_modules(path.read_text(), "academy", modules):
            if module != _module_name(path):
                importers.setdefault(module, set()).add(_rel(path))
    tutorials_without_chapter = {p.stem for p in TUTORIALS} - {c.slug for c in CHAPTERS}
    found = tutorial_only_modules(importers, tutorials_without_chapter)
    assert not found, f"academy modules only tutorials use: {found}; move each into examples/<tutorial>/"


def test_helper_imported_modules():
    modules = {"academy", "academy.asm", "academy.bench", "academy.bench.results"}
    source = (
        "import os\nfrom academy import INTERPRETED, asm\nimport academy.bench.results as r\n"
        "def f():\n    from academy.bench.results import load\n    from . import sibling\n"
    )
    assert imported_modules(source, "academy", modules) == {"academy", "academy.asm", "academy.bench.results"}
    assert imported_modules("import academyx\nfrom examples.x import y\n", "academy", modules) == set()


def test_helper_tutorial_only_modules():
    importers = {
        "academy.asm": {"docs/tutorials/measuring.py", "tests/measuring/test_asm.py"},  # planted: a tutorial's tool
        "academy.notebook": {"docs/tutorials/measuring.py", "tests/site/test_conventions.py"},
        "academy.testing": {"examples/measuring/answers.py", "examples/gelu/kernel.py"},
        "academy.grid": {"tests/gelu/test_kernel.py"},  # gelu is a chapter, not a tutorial without one
    }
    assert tutorial_only_modules(importers, {"measuring"}) == ["academy.asm"]


def test_every_test_file_a_page_or_example_names_exists():
    """Pages and exercise modules point readers at the tests that check them: the paths, and the
    test functions named after ``::``, must resolve."""
    named = REPO_ROOT.glob("docs/**/*.md"), REPO_ROOT.glob("docs/tutorials/*.py"), REPO_ROOT.glob("examples/**/*.py")
    missing = []
    for paths in named:
        for path in paths:
            for ref, test in set(re.findall(r"\b(tests/[\w/]+\.py)(?:::(\w+))?", path.read_text())):
                target = REPO_ROOT / ref
                if not target.is_file() or (test and f"def {test}(" not in target.read_text()):
                    missing.append(f"{_rel(path)}: {ref}" + (f"::{test}" if test else ""))
    assert not missing, "tests named but not found:\n" + "\n".join(sorted(missing))
