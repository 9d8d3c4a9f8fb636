"""The report's system-metrics panel: CPU, GPU, GPU memory, memory and disk per host over time.

Input is profstack.jobs.instance_metrics.SystemMetrics (CloudWatch's 1-minute instance metrics, per GPU and
per vCPU). `system_panel` returns an HTML fragment for the trace report; `system_report` a whole page,
for jobs without traces. Same conventions as profstack/report/html.py: inline SVG, no script, every
string escaped, bounded output (hosts and points are capped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from profstack.analysis.summary import SEVERITY_ORDER
from profstack.jobs.instance_metrics import HostMetrics, Metric, Series, SystemMetrics, percentile
from profstack.report.format import esc
from profstack.report.html import page

MAX_HOSTS_DRAWN = 32
MAX_POINTS_DRAWN = 400
PALETTE = (
    "#3b6fd8", "#ef4444", "#0ea5a4", "#f59e0b", "#8b5cf6", "#22c55e", "#ec4899", "#64748b",
    "#0ea5e9", "#a15c00", "#15803d", "#d946ef",
)  # fmt: skip
CHARTS: tuple[tuple[Metric, str, str], ...] = (
    ("GPUUtilization", "GPU utilisation", "% per GPU"),
    ("GPUMemoryUtilization", "GPU memory", "% per GPU"),
    ("CPUUtilization", "CPU utilisation", "% per vCPU"),
    ("MemoryUtilization", "Host memory", "%"),
    ("DiskUtilization", "Disk", "%"),
)
_STYLE = """
.sys-chart { position: relative; }
.sys-chart svg { display: block; width: 100%; height: 170px; }
.sys-chart .grid line { stroke: var(--gridline); stroke-width: 1; }
.sys-chart polyline { fill: none; stroke-width: 1.6; vector-effect: non-scaling-stroke; }
.sys-axis { display: flex; justify-content: space-between; gap: 6px; font-size: 11px; color: var(--faint);
  margin-top: 2px; }
.sys-axis span:not(:first-child):not(:last-child) { text-align: center; }
@media (max-width: 640px) { .sys-axis span:nth-child(2), .sys-axis span:nth-child(4) { display: none; } }
.sys-ymax { position: absolute; top: 0; left: 4px; font-size: 11px; color: var(--faint); background: var(--label-bg);
  padding: 0 3px; }
.sys-table { width: 100%; border-collapse: collapse; font-size: 13px; }
.sys-table th, .sys-table td { text-align: right; padding: 4px 8px; border-bottom: 1px solid var(--line); }
.sys-table th:first-child, .sys-table td:first-child { text-align: left; }
.sys-links a { margin-right: 14px; }
"""


def _downsample(series: Series, limit: int = MAX_POINTS_DRAWN) -> list[tuple[float, float]]:
    pairs = list(zip(series.timestamps, series.values, strict=True))
    if len(pairs) <= limit:
        return pairs
    size = len(pairs) / limit
    out = []
    for i in range(limit):
        chunk = pairs[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)]
        out.append((sum(t for t, _ in chunk) / len(chunk), sum(v for _, v in chunk) / len(chunk)))
    return out


def _time(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%m-%d %H:%M")


def _ticks(start: float, end: float, parts: int = 4) -> list[str]:
    """Axis labels at `parts` + 1 even positions: the first with its date and year, the others the time of day
    (with the date again when the day changes), the last with its time zone."""
    out: list[str] = []
    previous = ""
    for i in range(parts + 1):
        moment = datetime.fromtimestamp(start + (end - start) * i / parts, tz=UTC)
        day = moment.strftime("%Y-%m-%d")
        text = moment.strftime("%H:%M") if day == previous else f"{day} {moment.strftime('%H:%M')}"
        previous = day
        out.append(text + (" UTC" if i == parts else ""))
    return out


def line_chart(
    lines: Sequence[tuple[str, str, Series]],
    *,
    start: float,
    end: float,
    y_max: float = 100.0,
    unit: str = "%",
    title: str = "",
) -> str:
    """Lines (label, colour, series) over [start, end]; y from 0 to y_max (raised to the data's maximum). The x axis
    is labelled with dates and times (UTC), the y axis with its top and unit; the accessible name says what each
    line holds (mean and peak)."""
    top = max([y_max, *[max(s.values, default=0.0) for _, _, s in lines]])
    span = max(end - start, 1.0)
    width, height = 1000.0, 170.0
    described = "; ".join(
        f"{label}: mean {sum(s.values) / len(s.values):.0f}{unit}, peak {max(s.values):.0f}{unit}"
        for label, _, s in lines
        if s.values
    )
    name = f"{title or 'metric'} from {_ticks(start, end)[0]} to {_ticks(start, end)[-1]}: {described}"
    parts = [
        f'<svg viewBox="0 0 {width:.0f} {height:.0f}" preserveAspectRatio="none" role="img" aria-label="{esc(name)}">',
        '<g class="grid">',
        *[f'<line x1="0" x2="{width:.0f}" y1="{height * f:.1f}" y2="{height * f:.1f}"/>' for f in (0.25, 0.5, 0.75)],
        "</g>",
    ]
    for label, color, series in lines:
        points = " ".join(
            f"{(t - start) / span * width:.1f},{height - max(v, 0.0) / top * height:.1f}"
            for t, v in _downsample(series)
        )
        if points:
            parts.append(f'<polyline points="{points}" stroke="{color}"><title>{esc(label)}</title></polyline>')
    parts.append("</svg>")
    ticks = "".join(f"<span>{esc(t)}</span>" for t in _ticks(start, end))
    return (
        f'<div class="sys-chart">{"".join(parts)}<span class="sys-ymax">{top:.0f}{esc(unit)}</span>'
        f'<div class="sys-axis">{ticks}</div><div class="xtitle">time (UTC), 1-minute averages</div></div>'
    )


def _legend(items: Sequence[tuple[str, str]]) -> str:
    return (
        '<div class="legend">'
        + "".join(f'<span><i style="background:{c}"></i>{esc(lab)}</span>' for lab, c in items)
        + "</div>"
    )


def _host_label(h: HostMetrics) -> str:
    hw = f"{h.instance_type}" if h.instance_type else "type unknown"
    return f"{h.host} ({hw})"


def _chart_card(m: SystemMetrics, metric: Metric, title: str, unit: str, hosts: Sequence[HostMetrics]) -> str:
    lines: list[tuple[str, str, Series]] = []
    raw: list[str] = []
    for i, h in enumerate(hosts):
        series = h.get(metric)
        if series is None:
            continue
        color = PALETTE[i % len(PALETTE)]
        lines.append((_host_label(h), color, series))
        if not series.normalised:
            raw.append(h.host)
    if not lines:
        return f'<div class="card"><h3>{esc(title)}</h3><p class="empty">No data from CloudWatch.</p></div>'
    note = (
        f'<p class="notice warn">{esc(", ".join(raw))}: raw sum over the host (GPU or vCPU count unknown), '
        "not comparable per GPU.</p>"
        if raw
        else ""
    )
    legend = _legend([(label, color) for label, color, _ in lines])
    return (
        f'<div class="card"><h3>{esc(title)} <span class="hint">{esc(unit)}</span></h3>'
        f"{line_chart(lines, start=m.start, end=m.end, unit='%', title=f'{title} ({unit})')}{legend}{note}</div>"
    )


def _table(hosts: Sequence[HostMetrics]) -> str:
    head = "".join(f"<th>{esc(t)}<br><small>p50 / p95, {esc(u)}</small></th>" for _, t, u in CHARTS)
    rows = []
    for h in hosts:
        cells = []
        for metric, _, _ in CHARTS:
            s = h.get(metric)
            if s is None:
                cells.append("<td>—</td>")
                continue
            p50, p95 = percentile(s.values, 50), percentile(s.values, 95)
            flag = "" if s.normalised else " (raw)"
            cells.append(
                f"<td>{p50:.0f} / {p95:.0f}{esc(flag)}</td>" if p50 is not None and p95 is not None else "<td>—</td>"
            )
        counts = f"{h.gpus if h.gpus is not None else '?'} GPU · {h.vcpus if h.vcpus is not None else '?'} vCPU"
        rows.append(f"<tr><td>{esc(_host_label(h))}<br><small>{esc(counts)}</small></td>{''.join(cells)}</tr>")
    return f'<table class="sys-table"><tr><th>Host</th>{head}</tr>{"".join(rows)}</table>'


def _findings(findings: Sequence[Mapping[str, Any]]) -> str:
    if not findings:
        return '<div class="card"><span class="badge ok">no issues</span> No system rule fired.</div>'
    ordered = sorted(findings, key=lambda f: SEVERITY_ORDER.get(str(f.get("severity")), 9))
    cards = []
    for f in ordered[:50]:
        sev = str(f.get("severity") or "info")
        sev = sev if sev in SEVERITY_ORDER else "info"
        host = (f.get("evidence") or {}).get("host") if isinstance(f.get("evidence"), Mapping) else None
        cards.append(
            f'<div class="card finding {esc(sev)}"><div class="head"><span class="badge {esc(sev)}">{esc(sev)}</span>'
            f'<span class="rule">{esc(f.get("rule_id", ""))}</span><span class="ranks">{esc(host or "job-wide")}</span>'
            f'</div><p>{esc(f.get("message", ""))}</p><div class="rec">{esc(f.get("recommendation", ""))}</div></div>'
        )
    return "".join(cards)


def system_panel(
    metrics: SystemMetrics | None,
    *,
    findings: Sequence[Mapping[str, Any]] = (),
    links: Mapping[str, str] | None = None,
    show_findings: bool = False,
    unavailable: str | None = None,
) -> str:
    """The system-metrics section of a report (an HTML fragment). `unavailable`: why CloudWatch could not be
    read (the section says so instead of looking like a job without metrics)."""
    head = (
        '<h2 id="system">System metrics <span class="hint">CloudWatch instance metrics, 1-min averages, per host'
        "</span></h2>"
    )
    link_html = ""
    links = {k: v for k, v in (links or {}).items() if v.startswith("https://")}  # never javascript: or data:
    if links:
        link_html = (
            '<p class="sys-links">'
            + "".join(f'<a href="{esc(url)}" rel="noreferrer">{esc(label)}</a>' for label, url in links.items())
            + "</p>"
        )
    rules = f"<h2>System findings</h2>{_findings(findings)}" if show_findings else ""
    if unavailable:
        reason = f'<p class="notice warn"><b>System metrics unavailable:</b> {esc(unavailable)}</p>'
        if metrics is None or not any(h.series for h in metrics.hosts):
            return f'<style>{_STYLE}</style><section class="system">{head}{link_html}{reason}{rules}</section>'
        link_html += reason
    if metrics is None:
        empty = '<p class="empty">No system metrics were read for this job.</p>'
        return f'<style>{_STYLE}</style><section class="system">{head}{link_html}{empty}{rules}</section>'
    notices = "".join(f'<p class="notice warn">{esc(w)}</p>' for w in metrics.warnings[:10])
    hosts = list(metrics.hosts)
    shown = hosts[:MAX_HOSTS_DRAWN]
    more = (
        f'<p class="notice">Showing {len(shown)} of {len(hosts)} hosts; the table lists them all.</p>'
        if len(hosts) > len(shown)
        else ""
    )
    cards = "".join(_chart_card(metrics, metric, title, unit, shown) for metric, title, unit in CHARTS)
    return (
        f'<style>{_STYLE}</style><section class="system">{head}{link_html}{notices}{more}'
        f'<div class="grid wide">{cards}</div><h2>Per host</h2><div class="card">{_table(hosts)}</div>{rules}</section>'
    )


def system_report(
    metrics: SystemMetrics | None,
    *,
    findings: Sequence[Mapping[str, Any]] = (),
    links: Mapping[str, str] | None = None,
    title: str | None = None,
    message: str = "",
    preface: str = "",
    unavailable: str | None = None,
) -> str:
    """A whole self-contained page, for jobs without traces: the system panel and the system findings.
    `preface`: an HTML fragment from ProfStack's own renderers (e.g. no_traces.no_traces_section) shown first."""
    job = metrics.job if metrics is not None else ""
    page_title = title or (f"System report: {job}" if job else "ProfStack system report")
    window = (
        f"{_time(metrics.start)} – {_time(metrics.end)} UTC · period {metrics.period_s} s"
        if metrics is not None
        else ""
    )
    header = (
        f'<header class="top"><h1>{esc(page_title)}</h1><div class="sub">{esc(message)}</div>'
        f'<div class="meta"><div><b>Window</b>{esc(window or "—")}</div>'
        f"<div><b>Hosts</b>{len(metrics.hosts) if metrics else 0}</div></div></header>"
    )
    body = (
        header
        + preface
        + system_panel(metrics, findings=findings, links=links, show_findings=True, unavailable=unavailable)
    )
    return page(
        page_title,
        f"{body}<footer>Generated by profstack · CloudWatch instance metrics · self-contained, works offline</footer>",
    )
