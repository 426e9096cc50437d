"""The check that a page's prose quotes no measurement missing from its results files.

Tables, plots and summaries are generated from ``examples/<slug>/results/*.json``
by the bench hook. Prose may still *quote* a figure ("ours reaches 2,950 GB/s"),
and such a figure must be one the results files actually hold. This module
finds every quantity in a page's prose that a reader would take as a measurement
and checks it against everything the results files of that page can render.

The rule, precisely:

**Where it looks.** The Markdown source of a page, minus everything that is not
prose: fenced code blocks (and ``--8<--`` snippet lines),
inline code spans, math (``\\(..\\)``, ``\\[..\\]``, ``$..$``, ``$$..$$``), HTML
comments (bench directives are comments: what they render is generated, not
typed), HTML tags and their attributes, link targets ``](...)``, and the YAML
front matter.

**What counts as a quoted measurement.** A number (digits, optional thousands
commas and decimals) followed by one of the units the benchmarks produce:
``%``, ``×`` / ``x`` (a ratio), ``GB/s``, ``TB/s``, ``TFLOP/s`` (also
``TFLOPS``), ``ms``, ``µs`` / ``us``. Sizes (``KiB``, ``MiB``, ``GiB``) are ignored: in prose
they are nearly always sizes of tensors and caches, i.e. arithmetic; quote a
measured peak memory as a ratio (``1.50×`` the memory of eager), which is checked.

**What is not a measurement.**

1. *Bounds and bars*: a number preceded (optionally after ``**``/``about``) by
   ``≥ ≤ > < >= <=`` or by the words *at most, at least, up to, no more than,
   more than, less than, fewer than, under, below, above, over, beyond,
   within*: ``≥ 85%``, ``at most 2×``, ``slightly above 100 %``.
2. *Whole multiples*: a ratio written without a decimal point (``2×``, ``4x``)
   is exact arithmetic (bytes, passes, FLOPs); a measured ratio is always
   quoted with its decimals, as the tables print it (``1.23×``).
3. *The ends of the scale*: ``0%`` and ``100%`` ("the distance between our
   percentage of the ceiling and 100%") name the scale, not a measurement.
4. *Vendor figures*: a number in a sentence that names its source with one of
   the words *datasheet, data sheet, spec sheet, nominal, advertised* ("the
   datasheet gives 3.35 TB/s"). Sentences end at ``. ``, ``! ``, ``? `` or a
   blank line.
5. Anything in math: write derived figures as formulas, ``\\(8MN / 2MN = 4\\)``.

**When a quoted measurement passes.** When it equals a number the page's
results can render, of the same kind of unit, either exactly as
[`academy.bench.render.fmt`][] formats it, or as that value rounded to the
precision the prose uses, provided the prose keeps at least two significant
figures (``2,948.7 GB/s`` may be quoted as ``2,950 GB/s`` or ``2,900 GB/s``;
``0.97×`` may not be quoted as ``1×``). The numbers a page's results can
render are, per results file of the page's chapter (and of every chapter its
bench directives name): every row's median / p20 / p80 time (ms and µs), rate,
% of ceiling and p20–p80 spread, peak memory; both ceilings; for every case, the
ratio of any two providers' times and of their peak memory (both ways); the
geometric mean of ours vs the best peer; plus every number+unit in the text the
hook renders for every table, memory table, plot and summary.

A page whose chapter has no results file yet may quote no measurement at all.
Placeholder pages (a single ``# ... (placeholder`` line) are skipped.

Public API: [`find_quantities`][academy.site.prose_numbers.find_quantities] (the prose side),
[`measured_numbers`][academy.site.prose_numbers.measured_numbers] (the results side), `check_page`
(both: a list of problems) and [`check_markdown`][academy.site.prose_numbers.check_markdown]
(what [`academy.site.pages`][] calls for every kernel page).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path

from academy.bench import render
from academy.bench.results import OURS, Results, is_ours, load
from academy.chapters import DOCS_DIR, Chapter
from academy.site.headlines import headline

# unit as typed -> the kind it is compared as
UNITS = {
    "%": "%",
    "×": "x",
    "x": "x",
    "GB/s": "GB/s",
    "TB/s": "TB/s",
    "TFLOP/s": "TFLOP/s",
    "TFLOPS": "TFLOP/s",
    "ms": "ms",
    "µs": "us",
    "μs": "us",
    "us": "us",
}

NUMBER = r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
UNIT = r"(?P<unit>%|×|x(?![\w])|GB/s|TB/s|TFLOP/s|TFLOPS|ms(?![\w])|µs|μs|us(?![\w]))"
QUANTITY_RE = re.compile(NUMBER + r"\s*" + UNIT)
BOUND_RE = re.compile(
    r"(?:≥|≤|>=|<=|>|<|\bat most|\bat least|\bup to|\bno more than|\bmore than|\bless than|\bfewer than"
    r"|\bunder|\bbelow|\babove|\bover|\bbeyond|\bwithin)"
    r"(?:\s|\*|_|\bslightly\b|\babout\b|\broughly\b|\bjust\b)*$",
    re.IGNORECASE,
)
PLACEHOLDER_RE = re.compile(r"^#\s.*\(placeholder", re.IGNORECASE)


@dataclass(frozen=True)
class Quantity:
    line: int
    text: str  # as typed, e.g. "2,950 GB/s"
    value: float
    unit: str  # normalised kind: "%", "x", "GB/s", ...
    sig: int  # significant figures as typed
    decimals: int


# --------------------------------------------------------------------------- prose side


def is_placeholder(markdown: str) -> bool:
    lines = [line for line in markdown.strip().splitlines() if line.strip()]
    return len(lines) <= 1 and bool(lines) and bool(PLACEHOLDER_RE.match(lines[0]))


_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_MASKS = [
    re.compile(r"<!--.*?-->", re.S),  # comments, bench directives
    re.compile(r"\$\$.*?\$\$", re.S),
    re.compile(r"\\\[.*?\\\]", re.S),
    re.compile(r"\\\(.*?\\\)", re.S),
    re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<!\s)\$"),  # $..$ inline math
    re.compile(r"(`+).*?\1", re.S),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<[^>\n]+>"),  # html tags
]


def _blank(match: re.Match) -> str:
    """Keep newlines so line numbers survive the masking."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose_text(markdown: str) -> str:
    """The page with everything that is not prose blanked out (same line numbers)."""
    lines = markdown.split("\n")
    out: list[str] = []
    fence = None
    in_front_matter = bool(lines) and lines[0].strip() == "---"
    for i, line in enumerate(lines):
        if in_front_matter:
            out.append("")
            if i > 0 and line.strip() in ("---", "..."):
                in_front_matter = False
            continue
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if opened:
            fence = opened.group(1)
            out.append("")
            continue
        if "--8<--" in line:
            out.append("")
            continue
        out.append(line)
    text = "\n".join(out)
    for mask in _MASKS:
        text = mask.sub(_blank, text)
    return text


def _sig_figs(digits: str) -> tuple[int, int]:
    """Significant figures and decimals of a typed number ("2,950" -> (3, 0), "0.120" -> (3, 3))."""
    plain = digits.replace(",", "")
    decimals = len(plain.split(".", 1)[1]) if "." in plain else 0
    stripped = plain.replace(".", "").lstrip("0")
    if "." not in plain:
        stripped = stripped.rstrip("0") or stripped
    return max(len(stripped), 1), decimals


SOURCE_RE = re.compile(r"\b(datasheet|data sheet|spec sheet|nominal|advertised)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n\s*\n")


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around text[start:end] (ends at '. ', '! ', '? ' or a blank line)."""
    before = [m.end() for m in _SENTENCE_END.finditer(text, 0, start)]
    after = _SENTENCE_END.search(text, end)
    return text[(before[-1] if before else 0) : (after.start() if after else len(text))]


def find_quantities(markdown: str) -> list[Quantity]:
    """Every quantity in the prose that reads as a measurement (see the module docstring)."""
    text = prose_text(markdown)
    found = []
    for m in QUANTITY_RE.finditer(text):
        unit = UNITS[m.group("unit")]
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[line_start : m.start()]
        if BOUND_RE.search(before.rstrip()[-40:]):
            continue
        digits = m.group("num")
        if unit == "x" and "." not in digits:
            continue  # a whole multiple: arithmetic, not a measured ratio
        if unit == "%" and float(digits.replace(",", "")) in (0.0, 100.0):
            continue  # the ends of the scale: "the distance to 100%", "from 0%"
        if SOURCE_RE.search(_sentence(text, m.start(), m.end())):
            continue  # a vendor's figure, named as such
        sig, decimals = _sig_figs(digits)
        number = text.count("\n", 0, m.start()) + 1
        found.append(Quantity(number, m.group(0).strip(), float(digits.replace(",", "")), unit, sig, decimals))
    return found


# --------------------------------------------------------------------------- results side


def measured_numbers(
    results: Iterable[Results], headlines: dict[str, render.Headline] | None = None
) -> dict[str, set[float]]:
    """unit kind -> every value the results can render (raw, unrounded), see the module docstring."""
    values: dict[str, set[float]] = {k: set() for k in set(UNITS.values())}
    headlines = headlines or {}

    def add(unit: str, value: float | None) -> None:
        if value is not None and math.isfinite(value) and value > 0:
            values[unit].add(float(value))

    for res in results:
        add("GB/s", res.ceilings.copy_gbps)
        add("TB/s", res.ceilings.copy_gbps / 1000)
        add("TFLOP/s", res.ceilings.matmul_tflops)
        cases = render._group(res.rows)
        logs = []
        for by_provider in cases.values():
            for row in by_provider.values():
                for ms in (row.ms, row.ms_p20, row.ms_p80):
                    add("ms", ms)
                    add("us", ms * 1000)
                unit = res.unit_of(row.metric or res.metric)
                add(unit, row.rate)
                if unit == "GB/s":
                    add("TB/s", row.rate / 1000)
                add("%", row.fraction_of_ceiling * 100)
                add("%", render.spread(row) * 100)
            for a, b in permutations(by_provider.values(), 2):
                if a.ms > 0 and b.ms > 0:
                    add("x", a.ms / b.ms)
                    add("%", a.ms / b.ms * 100)  # "ours takes 80% of eager's time"
                    add("%", (a.ms / b.ms - 1) * 100)  # "23% faster"
                if a.peak_mib and b.peak_mib:
                    add("x", a.peak_mib / b.peak_mib)
            ratio = render.compare(by_provider).ratio
            if ratio:
                logs.append(math.log(ratio))
        if logs:
            add("x", math.exp(sum(logs) / len(logs)))
        for text in rendered_views(res, headlines.get(res.slug)):
            for m in QUANTITY_RE.finditer(text):
                add(UNITS[m.group("unit")], float(m.group("num").replace(",", "")))
    return values


def rendered_views(res: Results, headline: render.Headline | None = None) -> list[str]:
    """The text of every view the hook can render from one results file."""
    views = []
    combos = {(row.sweep, row.mode, row.dtype) for row in res.rows}
    for sweep, mode, dtype in sorted(combos):
        for draw in (render.table, render.memory, render.plot):
            try:
                views.append(draw(res, sweep=sweep, mode=mode, dtype=dtype))
            except (ValueError, ZeroDivisionError):
                pass
    if headline:
        try:
            views.append(render.summary(res, headline))
        except ValueError:
            pass
    return views


def matches(q: Quantity, measured: dict[str, set[float]]) -> bool:
    """The prose quantity equals a measured value as fmt prints it, or rounded to the prose's precision."""
    for value in measured.get(q.unit, ()):
        if abs(value - q.value) <= 1e-9 * max(1.0, abs(value)):
            return True
        if render.fmt(value).replace(",", "") == f"{q.value:.{q.decimals}f}":
            return True
        if q.sig >= 2 and round(value, q.decimals) == round(q.value, q.decimals):
            return True
        if q.sig >= 2 and q.decimals == 0 and q.value >= 10:
            # integer quotes of large values: "2,950" is 3 sig figs of 2,948.7
            if render.fmt(value, q.sig).replace(",", "").split(".")[0] == f"{q.value:.0f}":
                return True
    return False


# --------------------------------------------------------------------------- pages


DIRECTIVE_SLUG_RE = re.compile(r"<!--\s*bench:\w+\s+([\"']?)(?P<slug>[A-Za-z0-9_]+)\1")


def page_slugs(markdown: str, own_slug: str | None) -> list[str]:
    """The page's own chapter plus every chapter its bench directives name."""
    slugs = [own_slug] if own_slug else []
    for m in DIRECTIVE_SLUG_RE.finditer(markdown):
        if m.group("slug") not in slugs:
            slugs.append(m.group("slug"))
    return [s for s in slugs if Chapter(s).kernel_file.is_file()]


def slug_of_page(src_path: str) -> str | None:
    """``kernels/<slug>.md`` or ``tutorials/<slug>.py`` -> slug when that chapter exists."""
    p = Path(src_path)
    if p.parent.name in ("kernels", "tutorials") and Chapter(p.stem).kernel_file.is_file():
        return p.stem
    return None


def _headline(slug: str):
    try:
        return headline(slug)
    except Exception:
        return None


def check_markdown(markdown: str, src_path: str) -> list[str]:
    """Problems (one line each) for a page's Markdown; empty when every quoted measurement is measured."""
    if is_placeholder(markdown):
        return []
    quantities = find_quantities(markdown)
    if not quantities:
        return []
    slugs = page_slugs(markdown, slug_of_page(src_path))
    results = [load(path) for slug in slugs for path in Chapter(slug).results_files()]
    measured = measured_numbers(results, {s: h for s in slugs if (h := _headline(s))})
    where = ", ".join(f"examples/{s}/results/" for s in slugs) or "no results file"
    return [
        f"{src_path}:{q.line}: prose quotes {q.text!r}, which is not a number in {where} "
        "(quote it from a bench directive, write it as a bound like 'at most ...', or as math)"
        for q in quantities
        if not matches(q, measured)
    ]


def check_page(path: Path) -> list[str]:
    path = Path(path)
    try:
        src = path.relative_to(DOCS_DIR).as_posix()
    except ValueError:
        src = path.name
    return check_markdown(path.read_text(), src)


def kernel_pages() -> list[Path]:
    return sorted((DOCS_DIR / "kernels").glob("*.md"))


def is_finished(path: Path) -> bool:
    return not is_placeholder(Path(path).read_text())


__all__ = [
    "OURS",
    "Quantity",
    "check_markdown",
    "check_page",
    "find_quantities",
    "is_ours",
    "is_placeholder",
    "kernel_pages",
    "matches",
    "measured_numbers",
    "prose_text",
]
