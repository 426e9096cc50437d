"""The performance dashboard: every kernel × shape × GPU on one page, from the results files only.

``render_dashboard`` is pure (results in, Markdown out); [`dashboard`][academy.site.dashboard.dashboard]
finds the files, and the MkDocs hook expands ``<!-- bench:dashboard -->`` with
it (``docs/dashboard.md``).

It opens with **the summary at a glance**: one line per chapter and GPU with,
per mode, the geometric mean and the worst of ours against the best peer over
every measured case (`academy.bench.summary.summarize`), the worst case,
the median % of the ceiling, and the run's date and commit; each line links to
the chapter's detail section. A second table gives the same over the model-zoo
sweeps alone (`academy.bench.summary.SWEEP_SETS`), for every file that has them. Then one
section per chapter (linked to the chapter's page), one table per chapter with a line per
GPU × sweep × shape × dtype × mode, in the results file's order:
our median time and rate, **% of the ceiling that fits the row's metric**
(copy ceiling for bandwidth rows, matmul ceiling for compute rows: a chapter may
mix both), and the ratio to the best *peer* (``academy:<variant>`` stages are
ours, never peers), with that peer's name. A results file measured on older code
than the chapter's current [`code_hash`][academy.chapters.Chapter.code_hash] is marked
stale on every one of its lines. Numbers are formatted by
[`academy.bench.render`][], so the dashboard and the chapter pages agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from academy.bench import render
from academy.bench.results import OURS, Results
from academy.bench.summary import SWEEP_SETS, Summary, summarize


@dataclass(frozen=True)
class ChapterResults:
    slug: str
    title: str
    page: str  # docs-relative path of the chapter page, as the nav names it
    results: Sequence[Results]
    current_hash: str | None = None


def _title(slug: str) -> str:
    return slug.replace("_", " ").capitalize()


def _anchor(entry: ChapterResults) -> str:
    return f"chapter-{entry.slug.replace('_', '-')}"


def _is_stale(entry: ChapterResults, res: Results) -> bool:
    return entry.current_hash is not None and res.provenance.kernel_hash != entry.current_hash


def _per_mode(summaries: Sequence[Summary], text) -> str:
    """One cell: ``fwd 1.23× · fwd+bwd 1.10×``, a dash for a mode without a peer to compare."""
    return " · ".join(f"{s.mode} {text(s)}" for s in summaries)


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return render.DASH
    text = render.fmt_ratio(ratio)
    return f"**{text}**" if round(ratio, 2) >= 1 else text


def _worst_case(summaries: Sequence[Summary]) -> str:
    compared = [s for s in summaries if s.worst_ratio is not None]
    if not compared:
        return render.DASH
    worst = min(compared, key=lambda s: s.worst_ratio)
    return f"{worst.mode} {render.worst_case_text(worst.worst_ours, worst.worst_peer, worst.worst_ratio)}"


def summary_table(entries: Sequence[ChapterResults], sweeps: Callable[[str], bool] = SWEEP_SETS["all"]) -> str:
    """One line per chapter and GPU whose results have cases in ``sweeps`` (a set of `SWEEP_SETS`):
    the dashboard's first table over every case, its second over the model zoo; empty without a line."""
    lines = []
    for entry in entries:
        for res in sorted(entry.results, key=render.gpu_label):
            summaries = summarize(res, {"chosen": sweeps})
            if not summaries:
                continue
            fraction = _per_mode(
                summaries,
                lambda s: (
                    render.DASH
                    if s.median_fraction_of_ceiling is None
                    else render.fmt_pct(s.median_fraction_of_ceiling)
                ),
            )
            stale = " ⚠ stale" if _is_stale(entry, res) else ""
            lines.append(
                f"| [{entry.title}](#{_anchor(entry)}) | {render.gpu_label(res)}{stale} | "
                f"{_per_mode(summaries, lambda s: _ratio(s.geomean_ratio))} | "
                f"{_per_mode(summaries, lambda s: _ratio(s.worst_ratio))} | {_worst_case(summaries)} | {fraction} | "
                f"{res.provenance.date[:10]} `{res.provenance.git_commit[:7]}` |"
            )
    if not lines:
        return ""
    header = [
        "| chapter | GPU | vs best peer, geometric mean | worst | worst case | median % of ceiling | measured |",
        "|:--|:--|:--|:--|:--|:--|:--|",
    ]
    return "\n".join(header + lines) + "\n"


def chapter_table(entry: ChapterResults) -> str:
    """Seven narrow columns, so the table fits a laptop's window: the dtype goes with the shape, the
    rate with the time, the best peer's name with the ratio."""
    lines = [
        "| GPU | sweep | shape | mode | ours | % of ceiling | vs best peer |",
        "|:--|:--|:--|:--|--:|--:|:--|",
    ]
    stale_any = False
    for res in sorted(entry.results, key=render.gpu_label):
        stale = _is_stale(entry, res)
        stale_any = stale_any or stale
        gpu = render.gpu_label(res) + (" ⚠ stale" if stale else "")
        for key, by_provider in render._group(res.rows).items():
            ours = by_provider.get(OURS)
            if ours is None:
                continue
            metric = ours.metric or res.metric
            comp = render.compare(by_provider)
            versus = render.DASH
            if comp.ratio is not None:
                versus = f"{_ratio(comp.ratio)} {render.provider_label(comp.best_peer.provider)}"
            lines.append(
                f"| {gpu} | {key.sweep} | {render.shape_text(dict(key.params))}, {key.dtype} | {key.mode} | "
                f"{render.fmt(ours.ms)} ms · {render.fmt_rate(ours.rate, res.unit_of(metric))} | "
                f"{render.fmt_pct(ours.fraction_of_ceiling)} {render.ceiling_name(metric)} | {versus} |"
            )
    out = "\n".join(lines) + "\n"
    if stale_any:
        out += (
            "\n*⚠ stale: measured on older code than the chapter's current kernel; re-measure with `academy bench "
            + entry.slug
            + "`.*\n"
        )
    return out


def render_dashboard(entries: Sequence[ChapterResults]) -> str:
    measured = [e for e in entries if e.results]
    missing = [e for e in entries if not e.results]
    out = []
    if measured:
        gpus = sorted({render.gpu_label(r) for e in measured for r in e.results})
        lines = sum(1 for e in measured for r in e.results for row in r.rows if row.provider == OURS)
        out.append(
            f"{len(measured)} chapters measured on {', '.join(gpus)}; {lines} measured cases of ours. "
            "*% of ceiling* is against the copy ceiling for memory-bound rows and the matmul ceiling for "
            "compute-bound rows, both measured in the same run; *vs best peer* is the fastest peer's median ÷ ours "
            "(bold: ours at least as fast).\n"
        )
    else:
        out.append('!!! note "Nothing measured yet"\n\n    No chapter has committed results yet.\n')
    if measured:
        out.append(f"## At a glance\n\n{summary_table(measured)}")
        zoo = summary_table(measured, SWEEP_SETS["models"])
        if zoo:
            out.append(
                "## Over the model zoo\n\nThe same, over the cases of each chapter's model-zoo sweeps only: "
                f"shapes of real models (`academy/bench/models.py`).\n\n{zoo}"
            )
    for e in measured:
        dates = sorted({r.provenance.date[:10] for r in e.results})
        out.append(
            f"## {e.title} {{#{_anchor(e)}}}\n\n[{e.title}]({e.page}) · measured {', '.join(dates)}\n\n"
            f"{chapter_table(e)}"
        )
    if missing:
        links = ", ".join(f"[{e.title}]({e.page})" for e in missing)
        out.append(f"## Not measured yet\n\n{links}: no results file committed yet.\n")
    return "\n".join(out)


def dashboard(titles: Mapping[str, str] | None = None) -> str:
    """The dashboard over every chapter in ``examples/`` (what ``<!-- bench:dashboard -->`` renders)."""
    from academy.bench.results import load
    from academy.chapters import all_chapters

    titles = titles or {}
    entries = []
    for ch in all_chapters():
        if not ch.page.is_file():
            continue
        entries.append(
            ChapterResults(
                slug=ch.slug,
                title=titles.get(ch.slug, _title(ch.slug)),
                page=ch.nav_path,
                results=[load(p) for p in ch.results_files()],
                current_hash=ch.code_hash(),
            )
        )
    return render_dashboard(entries)
