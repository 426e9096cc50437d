"""Turn a results file into what a page shows: tables, plots, quoted numbers.

Every function here is pure: it takes `Results`
(already loaded) and returns Markdown or SVG text. Nothing here knows about
MkDocs; ``academy/site/pages.py`` only finds the files and calls these.

Numbers are formatted one way everywhere: three significant figures, thousands
separators (``2,950 GB/s``, ``0.123 ms``, ``87.3%``), ratios with two decimals
(``1.23×``). A ratio to the best peer is always *peer's median ÷ ours*, so
above 1 means ours is faster.
"""

from __future__ import annotations

import math
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


# --------------------------------------------------------------------------- table


def spread(row: Row) -> float:
    """Half the p20–p80 range relative to the median: the ``±`` shown next to a time."""
    return (row.ms_p80 - row.ms_p20) / 2 / row.ms if row.ms > 0 else math.nan


def _provider_cell(row: Row | None, unit: str) -> str:
    if row is None:
        return DASH
    return f"{fmt(row.ms)} ms <small>±{fmt(spread(row) * 100, 2)}%</small><br>{fmt(row.rate)} {unit}"


def _ratio_cell(comparison: Comparison) -> str:
    ratio = comparison.ratio
    if ratio is None:
        return DASH
    text = fmt_ratio(ratio)
    if round(ratio, 2) >= 1:
        text = f"**{text}**"
    return f"{text} <small>{escape(provider_label(comparison.best_peer.provider))}</small>"


def table(results: Results, *, sweep: str | None = None, mode: str | None = None, dtype: str | None = None) -> str:
    """A Markdown table, one line per case: per provider median ms and rate, ours vs the ceiling and peers."""
    sweep, mode, dtype = _resolve(results, sweep, mode, dtype, need_one=False)
    rows = _filter(results.rows, sweep, mode, dtype)
    if not rows:
        raise ValueError(f"{results.slug}: no rows to tabulate")
    cases = _group(rows)
    providers = order_providers(row.provider for row in rows)
    metric = metric_of(results, rows)
    unit = results.unit_of(metric)

    key_orders = {tuple(row.params) for row in rows}
    shape_header = "×".join(next(iter(key_orders))) if len(key_orders) == 1 else "shape"
    extra = [name for name in ("sweep", "dtype", "mode") if len({getattr(k, name) for k in cases}) > 1]

    labelled = any(row.label for row in rows)  # a zoo sweep: say which models each shape stands for
    header = [shape_header, *(["models"] if labelled else []), *extra]
    header += [provider_label(provider) for provider in providers]
    header += [f"% of {ceiling_name(metric)}", "vs best peer"]
    left = 1 + labelled + len(extra)  # left-aligned text columns

    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":--"] * left + ["--:"] * (len(header) - left)) + "|",
    ]
    for key, by_provider in cases.items():
        params = dict(key.params)
        shape = "×".join(str(v) for v in params.values()) if len(key_orders) == 1 else shape_text(params)
        label = next((row.label for row in by_provider.values() if row.label), "")
        cells = [shape, *([escape(label) or DASH] if labelled else []), *(getattr(key, name) for name in extra)]
        for provider in providers:
            cells.append(_provider_cell(by_provider.get(provider), unit))
        ours = by_provider.get(OURS)
        cells.append(DASH if ours is None else fmt_pct(ours.fraction_of_ceiling))
        cells.append(_ratio_cell(compare(by_provider)))
        lines.append("| " + " | ".join(cells) + " |")

    what = ", ".join(filter(None, [sweep, dtype, mode]))
    stages = any(is_ours(p) and p != OURS for p in providers)
    note = (
        f"*{what + ': ' if what else ''}median time per call over CUDA-graph replays ± half its p20–p80 range; "
        f"{unit} from the minimal "
        f"{'bytes' if metric == 'bandwidth' else 'FLOPs'} per call; % of the {ceiling_name(metric)} ceiling "
        f"measured in the same run ({fmt_rate(results.ceiling_of(metric, sweep), unit)}); "
        f"vs best peer = fastest peer's median ÷ ours, bold when ours is at least as fast"
        f"{'; ours (…) are our own earlier stages, not peers' if stages else ''}.*"
    )
    out = "\n".join(lines) + "\n\n" + note + "\n"
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


def memory(results: Results, *, sweep: str | None = None, mode: str | None = None, dtype: str | None = None) -> str:
    """A Markdown table of the peak memory one call allocates, per provider, with each
    provider's peak as a multiple of ours (above 1×: it needs more memory than ours)."""
    sweep, mode, dtype = _resolve(results, sweep, mode, dtype, need_one=False)
    rows = [row for row in _filter(results.rows, sweep, mode, dtype) if row.peak_mib is not None]
    if not rows:
        raise ValueError(f"{results.slug}: no peak memory recorded for sweep={sweep} mode={mode} dtype={dtype}")
    cases = _group(rows)
    providers = order_providers(row.provider for row in rows)
    key_orders = {tuple(row.params) for row in rows}
    shape_header = "×".join(next(iter(key_orders))) if len(key_orders) == 1 else "shape"
    extra = [name for name in ("sweep", "dtype", "mode") if len({getattr(k, name) for k in cases}) > 1]
    header = [shape_header, *extra, *(provider_label(p) for p in providers)]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":--"] * (1 + len(extra)) + ["--:"] * len(providers)) + "|",
    ]
    for key, by_provider in cases.items():
        params = dict(key.params)
        shape = "×".join(str(v) for v in params.values()) if len(key_orders) == 1 else shape_text(params)
        cells = [shape, *(getattr(key, name) for name in extra)]
        ours = by_provider.get(OURS)
        for provider in providers:
            row = by_provider.get(provider)
            if row is None:
                cells.append(DASH)
                continue
            cell = f"{fmt(row.peak_mib)} MiB"
            if ours is not None and provider != OURS and ours.peak_mib > 0:
                cell += f" <small>{fmt_ratio(row.peak_mib / ours.peak_mib)}</small>"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    what = ", ".join(filter(None, [sweep, dtype, mode]))
    note = (
        f"*{what + ': ' if what else ''}peak CUDA memory one call allocates beyond its inputs "
        "(`torch.cuda.max_memory_allocated`: outputs, saved tensors, gradients, workspaces); "
        "the small figure is that provider's peak ÷ ours.*"
    )
    return "\n".join(lines) + "\n\n" + note + "\n"


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


def summary(results: Results, headline: Headline) -> str:
    """An admonition quoting, per headline case, our % of ceiling and ratio to the best peer.

    ``!!! success`` when ours is at least as fast as every peer on every headline case,
    ``!!! warning`` otherwise (or when a headline case is missing from the file).
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
