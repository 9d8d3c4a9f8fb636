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


def shares_text(slices: Sequence[Slice]) -> str:
    """`computation 17.7%, idle 53.6%`: the slices as words, for a chart's accessible name."""
    total = sum(max(s.value, 0.0) for s in slices)
    if total <= 0:
        return "no data"
    return ", ".join(f"{s.label} {100.0 * max(s.value, 0.0) / total:.1f}%" for s in slices if s.value > 0)


def donut(slices: Sequence[Slice], *, center: str, caption: str = "", size: int = 150, label: str = "") -> str:
    """A ring chart with a big number in the middle (e.g. GPU active share). Its accessible name says what the
    ring shows, slice by slice."""
    total = sum(max(s.value, 0.0) for s in slices)
    r, stroke = 56.0, 18.0
    circ = 2 * math.pi * r
    name = f"{label or caption or 'ring chart'}: {center}; {shares_text(slices)}"
    parts = [
        f'<svg class="donut" viewBox="0 0 150 150" width="{size}" height="{size}" role="img" aria-label="{esc(name)}">',
        f'<circle cx="75" cy="75" r="{r}" fill="none" class="track-ring" stroke-width="{stroke}"/>',
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


def stacked_bar(slices: Sequence[Slice], *, height: int = 22, label: str = "") -> str:
    """A 100 % horizontal bar; slices under 0.5 % of the total still get a visible sliver. Its accessible name
    lists the slices with their shares."""
    total = sum(max(s.value, 0.0) for s in slices)
    name = f"{label}: {shares_text(slices)}" if label else shares_text(slices)
    parts = [
        f'<svg class="stacked" viewBox="0 0 1000 {height}" preserveAspectRatio="none" '
        f'width="100%" height="{height}" role="img" aria-label="{esc(name)}">',
        f'<rect x="0" y="0" width="1000" height="{height}" rx="4" class="track"/>',
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
    max_slot: float = 90.0,
    label: str = "",
    x_title: str = "",
) -> str:
    """Vertical bars (histograms, per-step times) with x labels under some bars, the scale's top written at the
    top left (``y_label``: with its unit), an axis title under the labels (``x_title``), and an accessible name
    (``label``, with the range of the values)."""
    n = len(values)
    if n == 0:
        return ""
    fmt = y_label or (lambda v: f"{v:,.4g}")
    name = f"{label or 'bar chart'}: {n} bar{'s' if n != 1 else ''} from {labels[0]} to {labels[-1]}, " + (
        f"values {fmt(min(values))} to {fmt(max(values))}"
    )
    width, top, bottom, left = 1000.0, 12.0, 26.0, 6.0
    plot_h = height - top - bottom
    vmax = max([*values, threshold or 0.0, 1e-12])
    slot = min((width - left * 2) / n, max_slot)  # a handful of bars should not become slabs
    left = max(left, (width - slot * n) / 2)  # ...and sit centred
    gap = min(slot * 0.18, 6.0)
    every = label_every or max(1, math.ceil(n / 14))
    parts = [
        f'<svg class="columns" viewBox="0 0 {width:.0f} {height}" width="100%" height="{height}" '
        f'preserveAspectRatio="none" role="img" aria-label="{esc(name)}">',
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
    title = f'<div class="xtitle">{esc(x_title)}</div>' if x_title else ""
    extra = 18 + (16 if x_title else 0)
    return (
        f'<div class="colchart" style="height:{height + extra}px"><div class="colplot" style="height:{height}px">'
        f'{"".join(parts)}{thr}{scale}</div><div class="xlabels">{"".join(label_html)}</div>{title}</div>'
    )


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float]
    color: str
    fill: bool = False  # an area from the axis instead of a line


def time_chart(
    series: Sequence[Series],
    *,
    x_ticks: Sequence[tuple[float, str]],
    y_max: float | None = None,
    y_label: Callable[[float], str] | None = None,
    height: int = 120,
    hint: Callable[[int], str] | None = None,
    label: str = "",
    x_title: str = "",
) -> str:
    """Series over time bins (all of one length): areas and lines on a shared y scale. ``x_ticks`` are
    (fraction of the width, label) pairs; ``hint(i)`` is the tooltip of bin i (one title per bin); ``x_title``
    names the x axis; the accessible name (``label``) lists the series with their mean and peak."""
    n = max((len(s.values) for s in series), default=0)
    if n == 0:
        return ""
    fmt = y_label or (lambda v: f"{v:,.4g}")
    described = "; ".join(
        f"{s.label}: mean {fmt(sum(s.values) / len(s.values))}, peak {fmt(max(s.values))}" for s in series if s.values
    )
    name = f"{label or 'chart over time'}, {n} time bins: {described}"
    width, top, bottom = 1000.0, 8.0, 2.0
    plot_h = height - top - bottom
    vmax = y_max if y_max is not None else max([max(s.values, default=0.0) for s in series] + [1e-12])
    vmax = vmax or 1.0
    step = width / n
    parts = [
        f'<svg class="timechart" viewBox="0 0 {width:.0f} {height}" width="100%" height="{height}" '
        f'preserveAspectRatio="none" role="img" aria-label="{esc(name)}">',
        f'<rect x="0" y="{top}" width="{width:.0f}" height="{plot_h:.1f}" class="plot"/>',
    ]
    for frac in (0.25, 0.5, 0.75):
        y = top + plot_h * (1 - frac)
        parts.append(f'<line x1="0" y1="{y:.1f}" x2="{width:.0f}" y2="{y:.1f}" class="grid"/>')

    def y_of(v: float) -> float:
        return top + plot_h - max(min(v, vmax), 0.0) / vmax * plot_h

    for s in series:
        pts = [(i * step + step / 2, y_of(v)) for i, v in enumerate(s.values)]
        if not pts:
            continue
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        if s.fill:
            base = top + plot_h
            parts.append(
                f'<polygon points="{pts[0][0]:.1f},{base:.1f} {line} {pts[-1][0]:.1f},{base:.1f}" '
                f'fill="{s.color}" fill-opacity="0.35" stroke="{s.color}" stroke-width="1.5" '
                f'vector-effect="non-scaling-stroke"><title>{esc(s.label)}</title></polygon>'
            )
        else:
            parts.append(
                f'<polyline points="{line}" fill="none" stroke="{s.color}" stroke-width="1.8" '
                f'vector-effect="non-scaling-stroke"><title>{esc(s.label)}</title></polyline>'
            )
    if hint is not None:
        for i in range(n):
            parts.append(
                f'<rect x="{i * step:.2f}" y="{top}" width="{step:.2f}" height="{plot_h:.1f}" fill="transparent">'
                f"<title>{esc(hint(i))}</title></rect>"
            )
    parts.append("</svg>")
    labels = []
    for frac, lab in x_ticks:
        pos = frac * 100
        shift = "0" if pos < 4 else "-100%" if pos > 96 else "-50%"
        labels.append(f'<span style="left:{pos:.2f}%;transform:translateX({shift})">{esc(lab)}</span>')
    scale = f'<span class="ymax">{esc(y_label(vmax))}</span>' if y_label else ""
    title = f'<div class="xtitle">{esc(x_title)}</div>' if x_title else ""
    extra = 18 + (16 if x_title else 0)
    return (
        f'<div class="colchart" style="height:{height + extra}px"><div class="colplot" style="height:{height}px">'
        f'{"".join(parts)}{scale}</div><div class="xlabels">{"".join(labels)}</div>{title}</div>'
    )


def heat_row(
    values: Sequence[float], *, color: str, hint: Callable[[int], str], height: int = 16, label: str = ""
) -> str:
    """One row of cells shaded by value (0-100): e.g. a rank's GPU busy share over time."""
    n = len(values)
    if n == 0:
        return ""
    name = (
        f"{label or 'share over time'}: {n} time bins, mean {sum(values) / n:.0f}%, "
        f"lowest {min(values):.0f}%, highest {max(values):.0f}%"
    )
    w = 1000.0 / n
    cells = "".join(
        f'<rect x="{i * w:.2f}" y="0" width="{w + 0.3:.2f}" height="{height}" fill="{color}" '
        f'fill-opacity="{max(min(v, 100.0), 0.0) / 100:.2f}"><title>{esc(hint(i))}</title></rect>'
        for i, v in enumerate(values)
    )
    return (
        f'<svg class="heat" viewBox="0 0 1000 {height}" preserveAspectRatio="none" width="100%" height="{height}" '
        f'role="img" aria-label="{esc(name)}"><rect x="0" y="0" width="1000" height="{height}" class="track"/>'
        f"{cells}</svg>"
    )


def strip(values: Sequence[float], labels: Sequence[str], *, fmt: Callable[[float], str], colors: Sequence[str]) -> str:
    """A dot per value on one horizontal axis, each labelled (for a handful of values, e.g. < 10 steps)."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or max(abs(hi) * 0.05, 1.0)
    lo, hi = max(lo - pad, 0.0), hi + pad
    rows = []
    for i, (v, lab) in enumerate(zip(values, labels, strict=True)):
        pos = (v - lo) / (hi - lo) * 100
        rows.append(
            f'<div class="strip-row"><span class="strip-label">{esc(lab)}</span><span class="strip-track">'
            f'<i style="left:{pos:.2f}%;background:{colors[i]}" title="{esc(lab)}: {esc(fmt(v))}"></i>'
            + (
                f'<em style="right:{100 - pos:.2f}%;margin-right:9px">{esc(fmt(v))}</em>'
                if pos > 70
                else f'<em style="left:{pos:.2f}%;margin-left:9px">{esc(fmt(v))}</em>'
            )
            + "</span></div>"
        )
    axis = (
        f'<div class="strip-row"><span class="strip-label"></span><span class="strip-axis">'
        f"<span>{esc(fmt(lo))}</span><span>{esc(fmt(hi))}</span></span></div>"
    )
    return f'<div class="strip">{"".join(rows)}{axis}</div>'
