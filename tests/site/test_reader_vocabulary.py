"""Reader-facing pages use no private vocabulary of the people who wrote them.

A reader knows nothing of how the handbook was made: not the source documents'
nicknames ("the seeds"), not the GPU machines' ("the lent machines", "the
device tool"), nor the authors' way of working ("this session", "a scratch
run", "issue 30", "the bar"). A page names a source by its title, a GPU by
its name and a run by its date and commit.

Pages: every Markdown page under ``docs/`` and every tutorial notebook
(``docs/tutorials/*.py``, its comment lines: markdown cells and code comments
alike are shown). Only prose is read: code spans, fenced code and math are
blanked first (``academy.site.prose_numbers.prose_text``), so a random
``seed`` argument or a math bar \\(\\bar z\\) is not prose.
"""

from __future__ import annotations

import re
from pathlib import Path

from academy.chapters import DOCS_DIR
from academy.site.prose_numbers import prose_text

import pytest

# phrase -> what to write instead
DENIED = {
    r"\bthe seeds\b|\bseeds'|\bseed's\b": "name the source document by its title",
    r"\bthe seed (?:concluded|reported|measured|timed|said|wrote)\b": "name the source document by its title",
    r"\bseed (?:material|documents?|files?|repositor(?:y|ies)|kernels?)\b": "name the source document",
    r"\blent\b": "name the GPU (NVIDIA H100 80GB HBM3, H200)",
    r"\bdevice (?:tool|call|budget)s?\b": "name the GPU, or say 'a GPU job'",
    r"\bsessions?\b": "name the run by its date and commit",
    r"\bscratch\b": "say 'exploratory', and that it is not in a results file",
    r"\bissue #?\d+\b": "say what the issue was",
    r"\bGPU rounds?\b|\b(?:this|previous|earlier) rounds?\b": "name the run by its date and commit",
    r"(?<!\\)\bbars?\b": "say 'target' (a performance goal) or 'tolerance' (an error bound)",
}
# contributing.md is for contributors: its tolerance table may call a tolerance a bar.
ALLOWED = {"contributing.md": {r"(?<!\\)\bbars?\b"}}


def reader_pages() -> list[Path]:
    pages = [p for p in DOCS_DIR.rglob("*.md") if "assets" not in p.parts]
    return sorted(pages + list((DOCS_DIR / "tutorials").glob("*.py")))


def page_prose(path: Path) -> str:
    text = path.read_text()
    if path.suffix == ".py":  # comment lines only, as Markdown (same line numbers)
        text = "\n".join(
            re.sub(r"^#\s?", "", line) if line.lstrip().startswith("#") else "" for line in text.split("\n")
        )
    return prose_text(text)


def denied_phrases(prose: str, allowed: set[str] = frozenset()) -> list[tuple[int, str, str]]:
    found = []
    for number, line in enumerate(prose.split("\n"), start=1):
        for pattern, instead in DENIED.items():
            if pattern in allowed:
                continue
            for match in re.finditer(pattern, line, re.IGNORECASE):
                found.append((number, match.group(0), instead))
    return found


@pytest.mark.parametrize("path", reader_pages(), ids=lambda p: str(p.relative_to(DOCS_DIR)))
def test_page_uses_no_private_vocabulary(path):
    problems = denied_phrases(page_prose(path), ALLOWED.get(path.name, set()))
    assert not problems, "\n".join(
        f"{path.relative_to(DOCS_DIR)}:{n}: {word!r}: {instead}" for n, word, instead in problems
    )


@pytest.mark.parametrize(
    "prose",
    [
        "The seeds' figures, and their lesson.",
        "the kernels repository among the seeds timed",
        "as the seed's do",
        "where the seed concluded that",
        "The worked example (from the seed material):",
        "Benchmarks on the lent machines are timed",
        "it costs the whole device call",
        "in an earlier run of this session",
        "a scratch run on the H100",
        "fixed in issue 30",
        "so that both chapters fit one GPU round",
        "Both clear the ≥ 85% bar.",
    ],
)
def test_helper_finds_each_kind(prose):
    assert denied_phrases(prose_text(prose))


@pytest.mark.parametrize(
    "prose",
    [
        "Same seed and offset, same number; a fresh seed gives a fresh mask.",
        "Run the test over a few thousand seeds first.",
        "takes a 64-bit key (the seed) and a 128-bit counter",
        "`tl.rand(seed, offsets)` and `dropout(x, p, seed)`",
        r"The mean \(\bar z\) is accumulated in sweep 1.",
        "The earlier Triton Academy repository's kernel had this bug.",
        "an exploratory H100 run (not in the committed results)",
        "the targets this chapter set itself",
    ],
)
def test_helper_leaves_ordinary_words(prose):
    assert denied_phrases(prose_text(prose)) == []
