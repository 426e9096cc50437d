"""The roofline model and its plot: TFLOP/s a kernel can reach at a given FLOP per byte.

:func:`ridge_point` and :func:`attainable` are the model; :func:`roofline_svg`
draws it, log-log, with measured points (Learn tutorial "The GPU you are
programming"; the points come from :mod:`examples.gpu_model.measured`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from academy.bench.render import SERIES_COLORS, fmt


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """Arithmetic intensity (FLOP/byte) where the compute roof meets the bandwidth roof."""
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def attainable(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """The roofline: the best TFLOP/s a kernel of this intensity can reach."""
    return min(peak_tflops, intensity * bandwidth_gbps / 1000)


@dataclass(frozen=True)
class Roof:
    label: str
    tflops: float
    dashed: bool = False


@dataclass(frozen=True)
class Point:
    label: str
    intensity: float  # FLOP/byte
    tflops: float
    group: str  # points of one group share a colour and a legend entry


def _decade_ticks(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _tick_label(value: float) -> str:
    return f"{value:g}" if 1e-3 <= value < 1e5 else f"1e{round(math.log10(value))}"


def roofline_svg(
    bandwidth_gbps: float,
    roofs: Sequence[Roof],
    points: Sequence[Point] = (),
    title: str = "Roofline",
    bandwidth_label: str = "memory",
) -> str:
    """A log-log roofline as inline SVG: TFLOP/s against FLOP/byte.

    One slanted bandwidth roof, one flat roof per entry of ``roofs`` (the
    first is the main compute ceiling; its ridge point is marked), and the
    measured ``points``. Returns a ``<div>`` holding the ``<svg>``.
    """
    if not roofs:
        raise ValueError("a roofline needs at least one compute roof")
    top_roof = max(r.tflops for r in roofs)
    main = roofs[0]
    ridge = ridge_point(main.tflops, bandwidth_gbps)
    intensities = [p.intensity for p in points] + [ridge]
    x_lo = 10.0 ** math.floor(math.log10(min(intensities) / 2))
    x_hi = 10.0 ** math.ceil(math.log10(max(intensities) * 4))
    rates = [p.tflops for p in points] + [attainable(x_lo, top_roof, bandwidth_gbps)]
    y_lo = 10.0 ** math.floor(math.log10(min(rates)))
    y_hi = 10.0 ** math.ceil(math.log10(top_roof * 1.5))

    width, height = 720, 440
    left, right, top, bottom = 72, 24, 40, 92
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * plot_w

    def py(v: float) -> float:
        return top + plot_h - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * plot_h

    aria = (
        f"{title}. {bandwidth_label} roof {fmt(bandwidth_gbps)} GB/s; "
        + "; ".join(f"{r.label} {fmt(r.tflops)} TFLOP/s" for r in roofs)
        + f"; ridge point {fmt(ridge)} FLOP/byte; "
        + "; ".join(f"{p.label} at {fmt(p.intensity)} FLOP/byte reaches {fmt(p.tflops)} TFLOP/s" for p in points)
    )
    out = [
        '<div class="academy-plot">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label={quoteattr(aria)} font-size="12" style="max-width: 100%; height: auto;">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="22" fill="currentColor" font-size="14" font-weight="bold">{escape(title)}</text>',
        '<g class="axes" fill="currentColor" stroke="currentColor">',
    ]
    for v in _decade_ticks(y_lo, y_hi):
        if y_lo <= v <= y_hi:
            y = py(v)
            out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke-opacity="0.15"/>')
            out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" stroke="none">{_tick_label(v)}</text>')
    base = top + plot_h
    for v in _decade_ticks(x_lo, x_hi):
        if x_lo <= v <= x_hi:
            x = px(v)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{base}" stroke-opacity="0.15"/>')
            out.append(f'<text x="{x:.1f}" y="{base + 18}" text-anchor="middle" stroke="none">{_tick_label(v)}</text>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{base}" y2="{base}"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{base}"/>')
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{base + 40}" text-anchor="middle" stroke="none">'
        "arithmetic intensity, FLOP/byte (log scale)</text>"
    )
    out.append(
        f'<text transform="translate(18 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" stroke="none">'
        "TFLOP/s (log scale)</text>"
    )
    out.append("</g>")
    # roofs: the bandwidth slope up to the highest roof, then each flat roof from its own ridge
    out.append('<g class="roofs" fill="none" stroke="currentColor" stroke-width="2">')
    x_top = min(x_hi, top_roof * 1000 / bandwidth_gbps)
    out.append(
        f'<line x1="{px(x_lo):.1f}" y1="{py(attainable(x_lo, top_roof, bandwidth_gbps)):.1f}" '
        f'x2="{px(x_top):.1f}" y2="{py(attainable(x_top, top_roof, bandwidth_gbps)):.1f}"/>'
    )
    slope_x = x_lo * 3
    out.append(
        f'<text x="{px(slope_x) + 6:.1f}" y="{py(attainable(slope_x, top_roof, bandwidth_gbps)) - 8:.1f}" '
        f'fill="currentColor" stroke="none">{escape(f"{bandwidth_label} {fmt(bandwidth_gbps)} GB/s")}</text>'
    )
    for roof in roofs:
        x_start = max(x_lo, ridge_point(roof.tflops, bandwidth_gbps))
        dash = ' stroke-dasharray="6 4"' if roof.dashed else ""
        y = py(roof.tflops)
        out.append(f'<line x1="{px(x_start):.1f}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}"{dash}/>')
        out.append(
            f'<text x="{left + plot_w - 4}" y="{y - 6:.1f}" text-anchor="end" fill="currentColor" stroke="none">'
            f"{escape(f'{roof.label} {fmt(roof.tflops)} TFLOP/s')}</text>"
        )
    xr = px(ridge)
    out.append(
        f'<line x1="{xr:.1f}" x2="{xr:.1f}" y1="{py(main.tflops):.1f}" y2="{base}" '
        'stroke-dasharray="2 4" stroke-width="1"/>'
    )
    out.append(
        f'<text x="{xr + 4:.1f}" y="{base - 8}" fill="currentColor" stroke="none">'
        f"{escape(f'ridge {fmt(ridge)} FLOP/B')}</text>"
    )
    out.append("</g>")
    # points, one colour per group, with a legend
    groups = list(dict.fromkeys(p.group for p in points))
    out.append('<g class="points">')
    for p in points:
        color = SERIES_COLORS[groups.index(p.group) % len(SERIES_COLORS)]
        tip = f"{p.label}: {fmt(p.intensity)} FLOP/B, {fmt(p.tflops)} TFLOP/s"
        out.append(
            f'<circle cx="{px(p.intensity):.1f}" cy="{py(p.tflops):.1f}" r="4.5" fill="{color}" fill-opacity="0.85">'
            f"<title>{escape(tip)}</title></circle>"
        )
    for i, group in enumerate(groups):
        x = left + 10 + i * 220
        y = height - 14
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        out.append(f'<circle cx="{x}" cy="{y - 4}" r="4.5" fill="{color}"/>')
        out.append(f'<text x="{x + 10}" y="{y}" fill="currentColor">{escape(group)}</text>')
    out.append("</g>")
    out.append("</svg>")
    out.append("</div>")
    return "\n".join(out)
