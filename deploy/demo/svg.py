"""Tiny inline-SVG line charts for the HTML report (no plotting library on the machine)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

Point = tuple[float, float]
Band = tuple[float, float, float]
"""(x, low, high): an interval drawn as a shaded area around its series."""

_W, _H, _PAD = 720, 240, 48
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _scale(lo: float, hi: float, size: float, flip: bool) -> tuple[float, float]:
    span = (hi - lo) or 1.0
    return (-size / span, _PAD + size) if flip else (size / span, _PAD)


def line_chart(
    title: str, series: dict[str, Sequence[Point]], markers: Sequence[tuple[float, str]] = (),
    y_label: str = "", bands: dict[str, Sequence[Band]] | None = None,
) -> str:
    """`bands`: per series name, its interval at each x (shaded in the series' colour)."""
    bands = bands or {}
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<p>{escape(title)}: no data</p>"
    highs = [b[2] for band in bands.values() for b in band]
    xs, ys = [p[0] for p in points] + [m[0] for m in markers], [p[1] for p in points] + highs
    x0, x1, y1 = min(xs), max(xs), max(ys) * 1.1 or 1.0
    w, h = _W - 2 * _PAD, _H - 2 * _PAD

    def x(v: float) -> float:
        return _PAD + (v - x0) / ((x1 - x0) or 1.0) * w

    def y(v: float) -> float:
        return _PAD + h - v / y1 * h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'font-family="sans-serif" font-size="11">',
        f'<text x="{_PAD}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{_PAD}" y1="{_PAD + h}" x2="{_PAD + w}" y2="{_PAD + h}" stroke="#444"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_PAD + h}" stroke="#444"/>',
        f'<text x="{_PAD - 4}" y="{_PAD + 4}" text-anchor="end">{y1:.3g}</text>',
        f'<text x="{_PAD - 4}" y="{_PAD + h}" text-anchor="end">0</text>',
        f'<text x="{_PAD}" y="{_H - 8}">{x0:.0f} s</text>',
        f'<text x="{_PAD + w}" y="{_H - 8}" text-anchor="end">{x1:.0f} s</text>',
        f'<text x="10" y="{_PAD - 8}">{escape(y_label)}</text>',
    ]
    for i, (at, label) in enumerate(markers):
        parts.append(f'<line x1="{x(at):.1f}" y1="{_PAD}" x2="{x(at):.1f}" y2="{_PAD + h}" '
                     'stroke="#999" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{x(at) + 3:.1f}" y="{_PAD + 12 + 12 * (i % 3)}" '
                     f'fill="#555">{escape(label)}</text>')
    for i, (name, data) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        if band := bands.get(name):
            outline = [(a, hi) for a, _, hi in band] + [(a, lo) for a, lo, _ in reversed(band)]
            area = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in outline)
            parts.append(f'<polygon fill="{colour}" fill-opacity="0.12" stroke="none" '
                         f'points="{area}"/>')
        path = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in data)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" '
                     f'points="{path}"/>')
        parts.append(f'<text x="{_PAD + w - 150}" y="{_PAD + 14 * (i + 1)}" '
                     f'fill="{colour}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
