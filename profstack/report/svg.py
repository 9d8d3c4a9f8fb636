"""Inline SVG charts for the HTML report. Pure string building; labels are escaped here too."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from profstack.report.format import esc


@dataclass(frozen=True)
class Slice:
    label: str
    value: float
    color: str
    hint: str = ""  # tooltip text; defaults to the label


def donut(slices: Sequence[Slice], *, center: str, caption: str = "", size: int = 150) -> str:
    """A ring chart with a big number in the middle (e.g. GPU active share)."""
    total = sum(max(s.value, 0.0) for s in slices)
    r, stroke = 56.0, 18.0
    circ = 2 * math.pi * r
    parts = [
        f'<svg class="donut" viewBox="0 0 150 150" width="{size}" height="{size}" role="img" '
        f'aria-label="{esc(caption or center)}">',
        f'<circle cx="75" cy="75" r="{r}" fill="none" stroke="#eef1f5" stroke-width="{stroke}"/>',
    ]
    offset = 0.0
    if total > 0:
        for s in slices:
            frac = max(s.value, 0.0) / total
            if frac <= 0:
                continue
            length = frac * circ
            parts.append(
                f'<circle cx="75" cy="75" r="{r}" fill="none" stroke="{s.color}" stroke-width="{stroke}" '
                f'stroke-dasharray="{length:.2f} {circ - length:.2f}" stroke-dashoffset="{-offset:.2f}" '
                f'transform="rotate(-90 75 75)"><title>{esc(s.hint or s.label)}</title></circle>'
            )
            offset += length
    parts.append(f'<text x="75" y="80" text-anchor="middle" class="donut-center">{esc(center)}</text>')
    if caption:
        parts.append(f'<text x="75" y="99" text-anchor="middle" class="donut-caption">{esc(caption)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def stacked_bar(slices: Sequence[Slice], *, height: int = 22) -> str:
    """A 100 % horizontal bar; slices under 0.5 % of the total still get a visible sliver."""
    total = sum(max(s.value, 0.0) for s in slices)
    parts = [
        f'<svg class="stacked" viewBox="0 0 1000 {height}" preserveAspectRatio="none" '
        f'width="100%" height="{height}" role="img">',
        f'<rect x="0" y="0" width="1000" height="{height}" rx="4" fill="#eef1f5"/>',
    ]
    x = 0.0
    if total > 0:
        for s in slices:
            w = max(s.value, 0.0) / total * 1000
            if w <= 0:
                continue
            w = max(w, 2.0)
            parts.append(
                f'<rect x="{x:.2f}" y="0" width="{w:.2f}" height="{height}" fill="{s.color}">'
                f"<title>{esc(s.hint or s.label)}</title></rect>"
            )
            x += w
    parts.append("</svg>")
    return "".join(parts)


def columns(
    values: Sequence[float],
    labels: Sequence[str],
    *,
    colors: Sequence[str] | None = None,
    hints: Sequence[str] | None = None,
    threshold: float | None = None,
    threshold_label: str = "",
    height: int = 170,
    label_every: int | None = None,
    y_label: Callable[[float], str] | None = None,
    ticks: Sequence[str] | None = None,
) -> str:
    """Vertical bars (histograms, per-step times) with x labels under some bars."""
    n = len(values)
    if n == 0:
        return ""
    width, top, bottom, left = 1000.0, 12.0, 26.0, 6.0
    plot_h = height - top - bottom
    vmax = max([*values, threshold or 0.0, 1e-12])
    slot = min((width - left * 2) / n, 90.0)  # a handful of bars should not become slabs
    left = max(left, (width - slot * n) / 2)  # ...and sit centred
    gap = min(slot * 0.18, 6.0)
    every = label_every or max(1, math.ceil(n / 14))
    parts = [
        f'<svg class="columns" viewBox="0 0 {width:.0f} {height}" width="100%" height="{height}" '
        f'preserveAspectRatio="none" role="img">',
        f'<line x1="0" y1="{top + plot_h:.1f}" x2="{width:.0f}" y2="{top + plot_h:.1f}" class="axis"/>',
    ]
    for i, v in enumerate(values):
        h = max(v, 0.0) / vmax * plot_h
        x = left + i * slot + gap / 2
        color = colors[i] if colors else "#3b6fd8"
        hint = hints[i] if hints else f"{labels[i]}: {v:g}"
        parts.append(
            f'<rect x="{x:.2f}" y="{top + plot_h - h:.2f}" width="{max(slot - gap, 1):.2f}" '
            f'height="{max(h, 0.0):.2f}" rx="2" fill="{color}"><title>{esc(hint)}</title></rect>'
        )
    parts.append("</svg>")
    # Labels are HTML, not SVG text, so they are not stretched by preserveAspectRatio="none".
    label_html = []
    if ticks is not None:  # labels at bar boundaries (histogram edges): n + 1 of them
        every = label_every or max(1, math.ceil(len(ticks) / 9))
        for i, lab in enumerate(ticks):
            if i % every == 0 or i == len(ticks) - 1:
                pos = (left + i * slot) / width * 100
                # Keep the outermost ticks inside the chart instead of centring them on the edge.
                shift = "0" if pos < 4 else "-100%" if pos > 96 else "-50%"
                label_html.append(f'<span style="left:{pos:.2f}%;transform:translateX({shift})">{esc(lab)}</span>')
    else:
        for i, lab in enumerate(labels):
            if i % every == 0:
                pos = (left + (i + 0.5) * slot) / width * 100
                label_html.append(f'<span style="left:{pos:.2f}%">{esc(lab)}</span>')
    thr = ""
    if threshold is not None and threshold > 0:
        y = (top + plot_h - threshold / vmax * plot_h) / height * 100
        thr = (
            f'<div class="threshold" style="top:{y:.2f}%"><span>{esc(threshold_label)}</span></div>'
            if 0 <= y <= 100
            else ""
        )
    scale = f'<span class="ymax">{esc(y_label(vmax))}</span>' if y_label else ""
    return (
        f'<div class="colchart" style="height:{height + 18}px"><div class="colplot" style="height:{height}px">'
        f'{"".join(parts)}{thr}{scale}</div><div class="xlabels">{"".join(label_html)}</div></div>'
    )
