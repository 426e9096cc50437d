"""Turn a results file into what a page shows: tables, plots, quoted numbers.

Every function here is pure: it takes `Results`
(already loaded) and returns Markdown or SVG text. Nothing here knows about
MkDocs; ``academy/site/pages.py`` only finds the files and calls these.

Numbers are formatted one way everywhere: three significant figures, thousands
separators (``2,950 GB/s``, ``0.123 ms``, ``87.3%``), ratios with two decimals
(``1.23×``). A ratio to the best peer is always *peer's median ÷ ours*, so
above 1 means ours is faster.

Tables fit the page's column (``TABLE_EM``; a tutorial's output column is
narrower, ``NOTEBOOK_TABLE_EM``): units sit once in the column header, a shape
may wrap after each ``×``, and a table whose columns would not fit is split
into tables that repeat the case columns and ours (`fit_columns`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from academy.bench.results import OURS, Results, Row, gpu_key, is_ours

PEER_ORDER = ("eager", "compile", "torch", "cublas", "sdpa", "flash", "liger")
"""Peers in the order columns and legends list them; unknown peers follow, sorted."""

PROVIDER_LABELS = {
    OURS: "ours",
    "eager": "eager",
    "compile": "torch.compile",
    "torch": "PyTorch",
    "cublas": "cuBLAS",
    "sdpa": "SDPA",
    "flash": "FlashAttention",
    "liger": "Liger",
}

# Mid-lightness hues readable on both Material's light and slate backgrounds.
SERIES_COLORS = ("#f76707", "#3b82f6", "#16a34a", "#a855f7", "#db2777", "#0891b2", "#a17a00", "#64748b")

DASH = "—"

Headline = Sequence[tuple[str, Mapping[str, int], str]]


# --------------------------------------------------------------------------- numbers


def fmt(value: float, sig: int = 3) -> str:
    """``value`` to ``sig`` significant figures with thousands separators."""
    if value is None or not math.isfinite(value):
        return DASH
    if value == 0:
        return "0"
    digits = sig - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)
    if rounded != 0:  # 9.996 -> 10.0: recount the digits after rounding up
        digits = sig - 1 - math.floor(math.log10(abs(rounded)))
        rounded = round(value, digits)
    return f"{rounded:,.{max(digits, 0)}f}"


def fmt_pct(fraction: float) -> str:
    return f"{fmt(fraction * 100)}%"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}×"


def fmt_rate(value: float, unit: str) -> str:
    return f"{fmt(value)} {unit}"


def provider_label(provider: str) -> str:
    """``"academy:unfused"`` reads "ours (unfused)": our own stage, never a peer."""
    if provider.startswith(OURS + ":"):
        return f"ours ({provider.split(':', 1)[1].replace('_', ' ')})"
    return PROVIDER_LABELS.get(provider, provider)


def gpu_label(results: Results) -> str:
    """Short GPU name for tabs and tables: 'NVIDIA H100 80GB HBM3' -> 'H100'."""
    return gpu_key(results.provenance.gpu).upper()


def ceiling_name(metric: str) -> str:
    return "copy" if metric == "bandwidth" else "matmul"


def metric_of(results: Results, rows: Sequence[Row]) -> str:
    """The one metric of a selection of rows (a sweep has one); several is an error."""
    metrics = _distinct(row.metric or results.metric for row in rows)
    if len(metrics) != 1:
        raise ValueError(f"{results.slug}: rows mix metrics {metrics}; select one sweep (sweep=...)")
    return metrics[0]


def shape_text(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def order_providers(providers: Iterable[str]) -> list[str]:
    """Ours first, then our own variants in first-seen order, then the known peers in
    [`PEER_ORDER`][academy.bench.render.PEER_ORDER], then the rest sorted."""
    seen = list(dict.fromkeys(providers))
    present = set(seen)
    ordered = [OURS] if OURS in present else []
    ordered += [p for p in seen if is_ours(p) and p != OURS]
    ordered += [p for p in PEER_ORDER if p in present]
    ordered += sorted(present - set(ordered))
    return ordered


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class CaseKey:
    sweep: str
    params: tuple[tuple[str, int], ...]
    dtype: str
    mode: str


def _key(row: Row) -> CaseKey:
    return CaseKey(row.sweep, tuple(row.params.items()), row.dtype, row.mode)


@dataclass(frozen=True)
class Comparison:
    """Ours against the fastest peer on one case."""

    ours: Row | None
    best_peer: Row | None

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.best_peer is None or self.ours.ms <= 0:
            return None
        return self.best_peer.ms / self.ours.ms


def compare(by_provider: Mapping[str, Row]) -> Comparison:
    peers = [row for provider, row in by_provider.items() if not is_ours(provider)]
    best = min(peers, key=lambda row: row.ms) if peers else None
    return Comparison(by_provider.get(OURS), best)


def _filter(rows: Iterable[Row], sweep: str | None, mode: str | None, dtype: str | None) -> list[Row]:
    return [
        row
        for row in rows
        if (sweep is None or row.sweep == sweep)
        and (mode is None or row.mode == mode)
        and (dtype is None or row.dtype == dtype)
    ]


def _group(rows: Iterable[Row]) -> dict[CaseKey, dict[str, Row]]:
    """Cases in file order, each mapping provider -> row (first row wins)."""
    cases: dict[CaseKey, dict[str, Row]] = {}
    for row in rows:
        cases.setdefault(_key(row), {}).setdefault(row.provider, row)
    return cases


def _check_choice(results: Results, name: str, value: str | None, choices: list[str]) -> str | None:
    if value is not None and value not in choices:
        raise ValueError(
            f"{results.slug}: no rows with {name}={value!r} (the results have: {', '.join(choices) or 'none'})"
        )
    return value


def _distinct(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _resolve(results: Results, sweep: str | None, mode: str | None, dtype: str | None, *, need_one: bool):
    """Validate filters against the rows; with ``need_one``, default each to the only value."""
    resolved = []
    for name, value in (("sweep", sweep), ("mode", mode), ("dtype", dtype)):
        choices = _distinct(getattr(row, name) for row in results.rows)
        value = _check_choice(results, name, value, choices)
        if value is None and need_one:
            if len(choices) != 1:
                raise ValueError(
                    f"{results.slug}: say which {name} to plot ({name}=...); the results have: {', '.join(choices)}"
                )
            value = choices[0]
        resolved.append(value)
    return resolved


# --------------------------------------------------------------------------- fitting a table to its column

TABLE_EM = 50.0
"""How wide a table may be, in ems of its text, on a Markdown page: the content column of a
1280-pixel window holds 688 px of table, 53.75 em of Material's 12.8-pixel table text; the rest
is a margin for `text_em`'s guesses."""

NOTEBOOK_TABLE_EM = 37.0
"""The same for a table in a tutorial's output, whose column loses the output prompt's width:
508 px, 39.7 em."""

CELL_PADDING_EM = 1.6
"""A cell's padding left and right (docs/stylesheets/a11y.css) and its border, in ems."""

_WBR = "<wbr>"
_TAG = re.compile(r"<(/?)(\w+)[^>]*>")
_NARROW = set("ijlrtf.,:;!|()[]' ")
_WIDE = set("MWmw%×@±—")


def breakable(name: str) -> str:
    """A name with places to wrap a table cell that the browser would not take by itself: after
    ``_`` and ``.`` inside it and inside a CamelCase word (``torch.<wbr>compile``,
    ``sdpa_<wbr>pregathered``, ``Flash<wbr>Attention``). Copied text is unchanged."""
    name = re.sub(r"([_.])(?=\w)", r"\1" + _WBR, name)
    return re.sub(r"(?<=[a-z]{3})(?=[A-Z][a-z]{2})", _WBR, name)


def shape_cell(values: Iterable[object]) -> str:
    """``8×<wbr>4096×<wbr>128``: a shape that may wrap after each ``×`` in a narrow column."""
    return ("×" + _WBR).join(escape(str(v)) for v in values)


def _char_em(char: str) -> float:
    if char in _NARROW:
        return 0.35
    if char in _WIDE or char.isupper():
        return 0.85
    return 0.62


def text_em(cell: str) -> float:
    """A guess at the narrowest a cell of Markdown and inline HTML can be, in ems of table text:
    its longest run that cannot wrap (wrapping at spaces, hyphens, ``<br>`` and ``<wbr>``),
    ``<small>`` text at 80% and bold text 10% wider. Erring wide: a table split too early is
    still readable, a table cut off is not."""
    cell = cell.replace("&nbsp;", "\u00a0")
    widest = run = 0.0
    small = 0
    bold = False
    i = 0
    while i < len(cell):
        tag = _TAG.match(cell, i)
        if tag:
            name = tag.group(2).lower()
            if name == "small":
                small += -1 if tag.group(1) else 1
            elif name in ("br", "wbr"):
                run = 0.0
            i = tag.end()
            continue
        if cell.startswith("**", i):
            bold = not bold
            i += 2
            continue
        char = cell[i]
        i += 1
        if char == " ":
            run = 0.0
            continue
        run += _char_em(char) * (0.8 if small else 1.0) * (1.1 if bold else 1.0)
        widest = max(widest, run)
        if char == "-":
            run = 0.0
    return widest


@dataclass(frozen=True)
class Column:
    """One column of a Markdown table: its header, its cells top to bottom, its alignment."""

    header: str
    cells: tuple[str, ...]
    numeric: bool = True

    @property
    def em(self) -> float:
        """The narrowest this column can be, padding included (`text_em`)."""
        return max(text_em(text) for text in (self.header, *self.cells)) + CELL_PADDING_EM


def markdown_table(columns: Sequence[Column]) -> str:
    """A Markdown table of ``columns``: text left-aligned, numbers right-aligned."""
    lines = [
        "| " + " | ".join(c.header for c in columns) + " |",
        "|" + "|".join("--:" if c.numeric else ":--" for c in columns) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in zip(*(c.cells for c in columns))]
    return "\n".join(lines)


def fit_columns(
    lead: Sequence[Column],
    providers: Mapping[str, Column],
    tail: Sequence[Column] = (),
    *,
    width_em: float = TABLE_EM,
) -> list[list[Column]]:
    """The columns of one table, or of several when they would not fit ``width_em`` together.

    ``lead`` (the case) starts every table and ``tail`` (ours against the ceiling and the peers)
    ends the first. Split, the first table holds ours and the peers, the next ones ours and its
    own earlier stages, each group in as many tables as it needs; ours starts each table, so that
    every number has ours beside it.
    """

    def em(columns: Iterable[Column]) -> float:
        return sum(c.em for c in columns)

    names = list(providers)
    if em(lead) + em(providers.values()) + em(tail) <= width_em:
        return [[*lead, *providers.values(), *tail]]
    head = [OURS] if OURS in providers else []
    peers = [p for p in names if not is_ours(p)]
    stages = [p for p in names if is_ours(p) and p != OURS]
    tables: list[list[str]] = []
    for group in (peers, stages):
        if not group:
            continue
        current = list(head)
        room = width_em - em(lead) - em(providers[p] for p in head) - (0 if tables else em(tail))
        for name in group:
            if len(current) > len(head) and providers[name].em > room:
                tables.append(current)
                current = list(head)
                room = width_em - em(lead) - em(providers[p] for p in head)
            current.append(name)
            room -= providers[name].em
        tables.append(current)
    return [
        [*lead, *(providers[p] for p in table), *(tail if i == 0 else ())] for i, table in enumerate(tables or [head])
    ]


def _continued(columns: Sequence[Column], providers: Mapping[str, Column]) -> str:
    """The line above a table split off from the first: what its columns add."""
    peers = [column for provider, column in providers.items() if not is_ours(provider)]
    if any(column is peer for column in columns for peer in peers):
        return "*The same cases: ours against more peers.*"
    return "*The same cases: ours against its own earlier stages.*"


def fitted_tables(
    lead: Sequence[Column],
    providers: Mapping[str, Column],
    tail: Sequence[Column] = (),
    *,
    width_em: float = TABLE_EM,
) -> str:
    """`fit_columns`' tables in Markdown, each one after the first under a line saying what it adds."""
    tables = fit_columns(lead, providers, tail, width_em=width_em)
    out = [markdown_table(tables[0])]
    out += [_continued(columns, providers) + "\n\n" + markdown_table(columns) for columns in tables[1:]]
    return "\n\n".join(out)


# --------------------------------------------------------------------------- table


def spread(row: Row) -> float:
    """Half the p20–p80 range relative to the median: the ``±`` shown next to a time."""
    return (row.ms_p80 - row.ms_p20) / 2 / row.ms if row.ms > 0 else math.nan


def time_unit(rows: Iterable[Row]) -> tuple[str, float]:
    """The unit a table gives its times in, and the factor from ms: the one whose longest figure
    is shorter, µs for short kernels (``13.1`` rather than ``0.0131``), ms on a tie."""
    times = [row.ms for row in rows]

    def longest(per_ms: float) -> int:
        return max(len(fmt(ms * per_ms)) for ms in times)

    return ("µs", 1000.0) if longest(1000.0) < longest(1.0) else ("ms", 1.0)


def _provider_cell(row: Row | None, per_ms: float) -> str:
    if row is None:
        return DASH
    return f"{fmt(row.ms * per_ms)} <small>±{fmt(spread(row) * 100, 2)}%</small><br>{fmt(row.rate)}"


def _ratio_cell(comparison: Comparison) -> str:
    ratio = comparison.ratio
    if ratio is None:
        return DASH
    text = fmt_ratio(ratio)
    if round(ratio, 2) >= 1:
        text = f"**{text}**"
    return f"{text} <small>{breakable(escape(provider_label(comparison.best_peer.provider)))}</small>"


def _case_columns(
    rows: Sequence[Row], cases: Mapping[CaseKey, Mapping[str, Row]], *, models: bool = True
) -> list[Column]:
    """The columns that say which case a line is: its shape, with the sweep, dtype and mode under it
    where they vary, and (``models``) the models it stands for in a zoo sweep."""
    key_orders = {tuple(row.params) for row in rows}
    one_order = len(key_orders) == 1
    extra = [name for name in ("sweep", "dtype", "mode") if len({getattr(k, name) for k in cases}) > 1]
    header = shape_cell(next(iter(key_orders))) if one_order else "shape"
    if extra:
        header += f"<br><small>{', '.join(extra)}</small>"
    cells = []
    for key in cases:
        params = dict(key.params)
        shape = shape_cell(params.values()) if one_order else shape_text(params)
        if extra:
            shape += f"<br><small>{escape(', '.join(str(getattr(key, name)) for name in extra))}</small>"
        cells.append(shape)
    columns = [Column(header, tuple(cells), numeric=False)]
    if models and any(row.label for row in rows):  # a zoo sweep: say which models each shape stands for
        labels = [next((row.label for row in by.values() if row.label), "") for by in cases.values()]
        columns.append(Column("models", tuple(escape(label) or DASH for label in labels), numeric=False))
    return columns


def _provider_header(provider: str, units: str) -> str:
    return f"{breakable(escape(provider_label(provider)))}<br><small>{units}</small>"


def table(
    results: Results,
    *,
    sweep: str | None = None,
    mode: str | None = None,
    dtype: str | None = None,
    width_em: float = TABLE_EM,
) -> str:
    """A Markdown table, one line per case: per provider the median time and rate, ours vs the
    ceiling and the peers; split in several when it would not fit ``width_em`` (`fit_columns`)."""
    sweep, mode, dtype = _resolve(results, sweep, mode, dtype, need_one=False)
    rows = _filter(results.rows, sweep, mode, dtype)
    if not rows:
        raise ValueError(f"{results.slug}: no rows to tabulate")
    cases = _group(rows)
    providers = order_providers(row.provider for row in rows)
    metric = metric_of(results, rows)
    unit = results.unit_of(metric)
    t_unit, per_ms = time_unit(rows)

    by_provider = {
        p: Column(
            _provider_header(p, f"{t_unit}, {unit}"),
            tuple(_provider_cell(case.get(p), per_ms) for case in cases.values()),
        )
        for p in providers
    }
    ceiling = Column(
        f"% of {ceiling_name(metric)}",
        tuple(DASH if OURS not in case else fmt_pct(case[OURS].fraction_of_ceiling) for case in cases.values()),
    )
    versus = Column("vs best peer", tuple(_ratio_cell(compare(case)) for case in cases.values()))

    what = ", ".join(filter(None, [sweep, dtype, mode]))
    stages = any(is_ours(p) and p != OURS for p in providers)
    note = (
        f"*{what + ': ' if what else ''}each provider's cell is its median time per call over CUDA-graph replays, "
        f"in {t_unit}, ± half its p20–p80 range, and under it the {unit} that time gives from the minimal "
        f"{'bytes' if metric == 'bandwidth' else 'FLOPs'} per call; % of the {ceiling_name(metric)} ceiling "
        f"measured in the same run ({fmt_rate(results.ceiling_of(metric, sweep), unit)}); "
        f"vs best peer = fastest peer's median ÷ ours, bold when ours is at least as fast"
        f"{'; ours (…) are our own earlier stages, not peers' if stages else ''}.*"
    )
    lead = _case_columns(rows, cases)
    out = fitted_tables(lead, by_provider, [ceiling, versus], width_em=width_em) + "\n\n" + note + "\n"
    host_timed = _distinct(row.provider for row in rows if row.host_timed)
    if host_timed:
        out += (
            "\n*Timed from the host with CUDA events, not in a CUDA graph, because they synchronise with the "
            f"host (which graph capture forbids): {', '.join(provider_label(p) for p in host_timed)}.*\n"
        )
    if results.skipped:
        out += (
            "\n*Not measured: "
            + "; ".join(f"{provider_label(p)} ({why})" for p, why in results.skipped.items())
            + ".*\n"
        )
    return out


# --------------------------------------------------------------------------- memory


def memory(
    results: Results,
    *,
    sweep: str | None = None,
    mode: str | None = None,
    dtype: str | None = None,
    width_em: float = TABLE_EM,
) -> str:
    """A Markdown table of the peak memory one call allocates, per provider, with each
    provider's peak as a multiple of ours (above 1×: it needs more memory than ours)."""
    sweep, mode, dtype = _resolve(results, sweep, mode, dtype, need_one=False)
    rows = [row for row in _filter(results.rows, sweep, mode, dtype) if row.peak_mib is not None]
    if not rows:
        raise ValueError(f"{results.slug}: no peak memory recorded for sweep={sweep} mode={mode} dtype={dtype}")
    cases = _group(rows)
    providers = order_providers(row.provider for row in rows)

    def cell(provider: str, by_provider: Mapping[str, Row]) -> str:
        row, ours = by_provider.get(provider), by_provider.get(OURS)
        if row is None:
            return DASH
        text = fmt(row.peak_mib)
        if ours is not None and provider != OURS and ours.peak_mib > 0:
            text += f" <small>{fmt_ratio(row.peak_mib / ours.peak_mib)}</small>"
        return text

    by_provider = {
        p: Column(_provider_header(p, "MiB"), tuple(cell(p, case) for case in cases.values())) for p in providers
    }
    lead = _case_columns(rows, cases, models=False)
    what = ", ".join(filter(None, [sweep, dtype, mode]))
    note = (
        f"*{what + ': ' if what else ''}peak CUDA memory one call allocates beyond its inputs, in MiB "
        "(`torch.cuda.max_memory_allocated`: outputs, saved tensors, gradients, workspaces); "
        "the small figure is that provider's peak ÷ ours.*"
    )
    return fitted_tables(lead, by_provider, width_em=width_em) + "\n\n" + note + "\n"


# --------------------------------------------------------------------------- plot


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


def _x_tick_label(value: float) -> str:
    if value >= 8192 and value == int(value) and int(value) % 1024 == 0:
        return f"{int(value) // 1024}K"
    if value == int(value):
        return str(int(value))
    return fmt(value)


def use_log_scale(xs: Sequence[float]) -> bool:
    """Log2 x axis when the swept values are positive and span at least 4×."""
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 4


_MARKERS = ("circle", "square", "triangle", "diamond")


def _marker(kind: str, x: float, y: float, color: str, tip: str) -> str:
    r = 4.0
    title = f"<title>{escape(tip)}</title>"
    if kind == "circle":
        shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}"'
    elif kind == "square":
        shape = f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}"'
    elif kind == "triangle":
        pts = f"{x:.1f},{y - r - 1:.1f} {x - r - 1:.1f},{y + r:.1f} {x + r + 1:.1f},{y + r:.1f}"
        shape = f'<polygon points="{pts}"'
    else:
        pts = f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} {x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}"
        shape = f'<polygon points="{pts}"'
    return f'{shape} fill="{color}">{title}</{shape.split()[0][1:]}>'


def plot(results: Results, *, sweep: str | None = None, mode: str | None = None, dtype: str | None = None) -> str:
    """An inline SVG line chart of rate against the swept parameter, one series per provider.

    ``sweep``, ``mode`` and ``dtype`` may be left out only when the results hold a single value.
    The SVG is wrapped in a ``<div>`` (a block-level tag) so Markdown leaves it alone.
    """
    sweep, mode, dtype = _resolve(results, sweep, mode, dtype, need_one=True)
    rows = [row for row in _filter(results.rows, sweep, mode, dtype) if row.x in row.params]
    if not rows:
        raise ValueError(f"{results.slug}: no rows for sweep={sweep} mode={mode} dtype={dtype}")
    x_name = rows[0].x
    metric = metric_of(results, rows)
    unit, ceiling = results.unit_of(metric), results.ceiling_of(metric, sweep)
    providers = order_providers(row.provider for row in rows)
    series = {
        p: sorted(((float(r.params[x_name]), r) for r in rows if r.provider == p), key=lambda t: t[0])
        for p in providers
    }
    xs = sorted({x for points in series.values() for x, _ in points})
    log = use_log_scale(xs)

    width, height = 720, 420
    left, right, top, bottom = 72, 24, 40, 100
    plot_w, plot_h = width - left - right, height - top - bottom

    tx = (lambda v: math.log2(v)) if log else (lambda v: v)
    lo, hi = tx(xs[0]), tx(xs[-1])
    if hi == lo:
        lo, hi = lo - 1, hi + 1

    def px(v: float) -> float:
        return left + (tx(v) - lo) / (hi - lo) * plot_w

    y_top = max([ceiling] + [r.rate for r in rows]) * 1.1
    step = _nice_step(y_top)
    y_max = math.ceil(y_top / step) * step

    def py(v: float) -> float:
        return top + plot_h - v / y_max * plot_h

    if log:
        exps = range(math.ceil(math.log2(xs[0]) - 1e-9), math.floor(math.log2(xs[-1]) + 1e-9) + 1)
        x_ticks = [2.0**e for e in exps]
        stride = max(1, math.ceil(len(x_ticks) / 9))
        x_ticks = x_ticks[::stride]
    elif len(xs) <= 9:
        x_ticks = xs
    else:
        xstep = _nice_step(xs[-1] - xs[0], 6)
        x_ticks = [v * xstep for v in range(math.ceil(xs[0] / xstep), math.floor(xs[-1] / xstep) + 1)]

    title = f"{results.slug}: {unit} vs {x_name} ({sweep}, {dtype}, {mode}) on {results.provenance.gpu}"
    summary_bits = []
    for p in providers:
        best = max(series[p], key=lambda t: t[1].rate)[1]
        summary_bits.append(f"{provider_label(p)} peaks at {fmt_rate(best.rate, unit)}")
    ceiling_text = f"{ceiling_name(metric)} ceiling {fmt_rate(ceiling, unit)}"
    aria = f"{title}. {'; '.join(summary_bits)}; {ceiling_text}."

    out = [
        '<div class="academy-plot">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label={quoteattr(aria)} font-size="12" style="max-width: 100%; height: auto;">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="22" fill="currentColor" font-size="14" font-weight="bold">'
        f"{escape(f'{sweep} · {dtype} · {mode}')}</text>",
    ]
    # grid and y axis
    out.append('<g class="y-axis" fill="currentColor" stroke="currentColor">')
    tick = 0.0
    while tick <= y_max + 1e-9:
        y = py(tick)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke-opacity="0.15"/>')
        out.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" stroke="none">{fmt(tick) if tick else "0"}</text>'
        )
        tick += step
    out.append(
        f'<text transform="translate(18 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" stroke="none">'
        f"{escape(unit)}</text>"
    )
    out.append("</g>")
    # x axis
    out.append('<g class="x-axis" fill="currentColor" stroke="currentColor">')
    base = top + plot_h
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{base}" y2="{base}"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{base}"/>')
    for v in x_ticks:
        x = px(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 5}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{base + 19}" text-anchor="middle" stroke="none">{escape(_x_tick_label(v))}</text>'
        )
    scale_note = " (log₂ scale)" if log else ""
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{base + 40}" text-anchor="middle" stroke="none">'
        f"{escape(x_name + scale_note)}</text>"
    )
    out.append("</g>")
    # ceiling
    yc = py(ceiling)
    out.append('<g class="ceiling" fill="currentColor" stroke="currentColor">')
    out.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{yc:.1f}" y2="{yc:.1f}" '
        'stroke-dasharray="6 4" stroke-opacity="0.7"/>'
    )
    out.append(
        f'<text x="{left + plot_w - 4}" y="{yc - 6:.1f}" text-anchor="end" stroke="none">{escape(ceiling_text)}</text>'
    )
    out.append("</g>")
    # series
    for i, p in enumerate(providers):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        marker = _MARKERS[i % len(_MARKERS)]
        pts = series[p]
        out.append(f'<g class="series" data-provider={quoteattr(p)}>')
        if len(pts) > 1:
            coords = " ".join(f"{px(x):.1f},{py(r.rate):.1f}" for x, r in pts)
            stroke = 3 if p == OURS else 2
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="{stroke}"/>')
        for x, r in pts:
            tip = f"{provider_label(p)}, {x_name}={_x_tick_label(x)}: {fmt_rate(r.rate, unit)}, {fmt(r.ms)} ms"
            out.append(_marker(marker, px(x), py(r.rate), color, tip))
        out.append("</g>")
    # legend, below the axis label
    out.append('<g class="legend" fill="currentColor">')
    item_w, per_line = 150, max(1, plot_w // 150)
    for i, p in enumerate(providers):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        lx = left + (i % per_line) * item_w
        ly = base + 64 + (i // per_line) * 18
        out.append(f'<line x1="{lx}" x2="{lx + 22}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="3"/>')
        out.append(_marker(_MARKERS[i % len(_MARKERS)], lx + 11, ly - 4, color, provider_label(p)))
        out.append(f'<text x="{lx + 28}" y="{ly}">{escape(provider_label(p))}</text>')
    out.append("</g>")
    out.append("</svg>")
    out.append("</div>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- summary


def find_case(results: Results, mode: str, shape: Mapping[str, int], dtype: str) -> dict[str, Row]:
    """provider -> row for one case (the first sweep that holds it); empty when not measured."""
    shape = dict(shape)
    for key, by_provider in _group(results.rows).items():
        if key.mode == mode and key.dtype == dtype and dict(key.params) == shape:
            return by_provider
    return {}


def worst_case_text(ours: Row, peer: Row, ratio: float) -> str:
    """``M=16384, N=5120 (Mistral-Nemo-12B, Phi-4), bfloat16: 0.85× torch.compile``: a worst case, as the
    summary box and the dashboard name it (the models, where the row stands for some)."""
    label = f" ({ours.label})" if ours.label else ""
    return f"{shape_text(dict(ours.params))}{label}, {ours.dtype}: {fmt_ratio(ratio)} {provider_label(peer.provider)}"


def summary(results: Results, headline: Headline, zoo: Sequence = ()) -> str:
    """An admonition quoting, per headline case, our % of ceiling and ratio to the best peer, then, per
    mode of ``zoo`` (the `academy.bench.summary.Summary` objects that ``summarize`` gives over the
    model-zoo sweeps; that module imports this one, so it is not imported here), the geometric mean
    and the worst case of that ratio.

    ``!!! success`` when ours is at least as fast as every peer on every headline case and every zoo
    case, ``!!! warning`` otherwise (or when a headline case is missing from the file).
    """
    if not headline:
        raise ValueError(f"{results.slug}: the bench spec declares no headline cases to summarise")
    ok = True
    items = []
    for mode, shape, dtype in headline:
        case = find_case(results, mode, shape, dtype)
        what = f"**{shape_text(shape)}**, {dtype}, {mode}"
        ours = case.get(OURS)
        if ours is None:
            ok = False
            items.append(f"- {what}: not measured in this results file.")
            continue
        metric = ours.metric or results.metric
        text = (
            f"- {what}: {fmt_rate(ours.rate, results.unit_of(metric))}, **{fmt_pct(ours.fraction_of_ceiling)}** of the "
            f"{ceiling_name(metric)} ceiling"
        )
        comp = compare(case)
        if comp.ratio is None:
            text += "; no peer measured."
        else:
            ok = ok and round(comp.ratio, 2) >= 1
            text += (
                f"; **{fmt_ratio(comp.ratio)}** the speed of the best peer, {provider_label(comp.best_peer.provider)} "
                f"({fmt(comp.best_peer.ms)} ms vs ours {fmt(ours.ms)} ms)."
            )
        items.append(text)
    for mode in (z for z in zoo if z.worst_ratio is not None):
        ok = ok and round(mode.worst_ratio, 2) >= 1
        items.append(
            f"- Over the model zoo, {mode.mode} ({mode.compared} cases): geometric mean "
            f"**{fmt_ratio(mode.geomean_ratio)}** the best peer; worst "
            f"{worst_case_text(mode.worst_ours, mode.worst_peer, mode.worst_ratio)}."
        )
    kind = "success" if ok else "warning"
    title = f"On {gpu_label(results)} ({results.provenance.gpu})"
    return f'!!! {kind} "{title}"\n\n' + "\n".join(f"    {line}" for line in items) + "\n"


# --------------------------------------------------------------------------- provenance


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line.strip() else "" for line in text.splitlines())


def _peer_libraries(peers: dict[str, str] | None) -> str:
    if peers is None:
        return "not recorded"
    return ", ".join(f"{name} {version}" for name, version in sorted(peers.items())) or "none installed"


def provenance(results: Results, *, current_kernel_hash: str | None = None) -> str:
    """A collapsed block with the machine, versions and ceilings; a visible warning when stale."""
    prov, ceil = results.provenance, results.ceilings
    date = prov.date[:10]
    commit = prov.git_commit[:12] + (" (with uncommitted changes)" if prov.git_dirty else "")
    fields = [
        ("GPU", f"{prov.gpu}, {prov.sm_count} SMs"),
        ("Driver / CUDA", f"{prov.driver} / {prov.cuda}"),
        ("torch / triton / Python", f"{prov.torch} / {prov.triton} / {prov.python}"),
        ("Date", prov.date),
        ("Commit", f"`{commit}`"),
        ("Kernel hash", f"`{prov.kernel_hash}`"),
        ("Peer libraries", _peer_libraries(prov.peers)),
        (
            "Copy ceiling",
            f"{fmt_rate(ceil.copy_gbps, 'GB/s')} "
            f"(device-to-device copy of {fmt(ceil.copy_bytes / 1e9)} GB, read + write)",
        ),
        (
            "Matmul ceiling",
            f"{fmt_rate(ceil.matmul_tflops, 'TFLOP/s')} (bf16 {'×'.join([str(ceil.matmul_size)] * 3)})",
        ),
    ]
    if results.timing:
        fields.append(("Timing", results.timing))
    if results.skipped:
        fields.append(("Not measured", "; ".join(f"{provider_label(p)}: {why}" for p, why in results.skipped.items())))
    body = "| | |\n|:--|:--|\n" + "\n".join(f"| {k} | {v} |" for k, v in fields)
    out = ""
    if current_kernel_hash is not None and current_kernel_hash != prov.kernel_hash:
        out += (
            '!!! warning "These numbers measured an older version of the kernel"\n\n'
            f"    The results on {gpu_label(results)} were measured on kernel code with hash `{prov.kernel_hash}` "
            f"({date}); the kernel is now `{current_kernel_hash}`. Re-measure with `academy bench {results.slug}` "
            "on a GPU.\n\n"
        )
    out += f'??? info "Measured on {prov.gpu}, {date}"\n\n{_indent(body)}\n'
    return out


# --------------------------------------------------------------------------- overview


def _title(slug: str) -> str:
    return slug.replace("_", " ").capitalize()


def overview(
    all_results: Iterable[Results],
    *,
    headlines: Mapping[str, Headline] | None = None,
    current_hashes: Mapping[str, str] | None = None,
    pages: Mapping[str, str] | None = None,
) -> str:
    """One table over every chapter × GPU results file, for the performance page.

    ``headlines`` maps slug -> the spec's headline cases; without them the ratio to the
    best peer is the geometric mean over every case. ``current_hashes`` (slug -> hash)
    marks stale files. ``pages`` maps slug -> the page to link (relative to the docs
    folder); by default ``kernels/<slug>.md``.
    """
    headlines = headlines or {}
    current_hashes = current_hashes or {}
    pages = pages or {}
    entries = sorted(all_results, key=lambda r: (r.slug, gpu_label(r)))
    if not entries:
        return (
            '!!! note "Nothing measured yet"\n\n'
            "    No chapter has committed results yet. Run `academy bench SLUG` on a GPU.\n"
        )
    lines = [
        "| Chapter | GPU | best % of ceiling | headline % of ceiling | vs best peer | measured |",
        "|:--|:--|--:|--:|--:|:--|",
    ]
    stale_any = False
    for res in entries:
        ours = [row for row in res.rows if row.provider == OURS]
        top = max(ours, key=lambda row: row.fraction_of_ceiling) if ours else None
        best = fmt_pct(top.fraction_of_ceiling) + f" {ceiling_name(top.metric or res.metric)}" if top else DASH
        head_pct, ratios = [], []
        for mode, shape, dtype in headlines.get(res.slug, ()):
            case = find_case(res, mode, shape, dtype)
            if OURS in case:
                head_pct.append(fmt_pct(case[OURS].fraction_of_ceiling))
                ratio = compare(case).ratio
                ratios.append(DASH if ratio is None else fmt_ratio(ratio))
        if not headlines.get(res.slug):
            logs = [
                math.log(r)
                for r in (compare(case).ratio for case in _group(res.rows).values())
                if r is not None and r > 0
            ]
            if logs:
                ratios = [f"{fmt_ratio(math.exp(sum(logs) / len(logs)))} <small>geo-mean</small>"]
        stale = res.slug in current_hashes and current_hashes[res.slug] != res.provenance.kernel_hash
        stale_any = stale_any or stale
        date = res.provenance.date[:10] + (" ⚠ stale" if stale else "")
        lines.append(
            f"| [{_title(res.slug)}]({pages.get(res.slug, f'kernels/{res.slug}.md')}) | {gpu_label(res)} | {best} | "
            f"{' / '.join(head_pct) or DASH} | {' / '.join(ratios) or DASH} | {date} |"
        )
    out = "\n".join(lines) + "\n"
    if stale_any:
        out += "\n*⚠ stale: the kernel changed after these numbers were measured; the chapter page says so too.*\n"
    return out
