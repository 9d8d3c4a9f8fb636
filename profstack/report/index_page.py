"""The report index page, reports/<user>/index.html: every job of a user, filtered and paged without a script,
and per job family the step-time and GPU-idle trend a person can read.

No script (the report's Content-Security-Policy forbids it): the filters are radio buttons read by CSS
(``:has()``), the pages are sections shown by ``:target``, and a CSS counter says how many jobs match. A filter
searches every page; without one, the newest PAGE_ROWS jobs show and the page links lead to the others. Every
string from a row is escaped; class names come from fixed vocabularies or from a family's position, never from
its name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from profstack import layout
from profstack.report.findings import prose, rule_title
from profstack.report.format import cost_text, dur, dur_tick, duration_text, esc, num, pct
from profstack.report.html import page

#: rows per page of the job table
PAGE_ROWS = 50
#: a family's trend chart shows its newest jobs only
MAX_TREND_POINTS = 60
#: families charted (the ones with the newest jobs first) and offered as filters; the table lists every job
MAX_FAMILIES_CHARTED = 24
MAX_FAMILY_FILTERS = 40
#: trend cards open on the page (the families with the newest jobs); the others behind "more"
FAMILIES_OPEN = 6
#: status filters (SageMaker's TrainingJobStatus, and the live analysis's InProgress)
STATUSES = ("Completed", "Failed", "Stopped", "InProgress")
SEVERITIES = ("critical", "warning", "info")
AGES = (7, 30)


def _ended(row: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(row.get("ended_at")).replace("Z", "+00:00"))
    except ValueError:
        return None


def _date(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d") if moment else "?"


def _families(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """(family, its jobs newest first), the families with the newest jobs first."""
    by_family: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:  # newest first
        family = row.get("family")
        if isinstance(family, str) and layout.is_segment(family):
            by_family.setdefault(family, []).append(row)
    return list(by_family.items())


# ------------------------------------------------------------------------------------------ trends


def _segments(points: Sequence[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive known points: a job without the number breaks the line."""
    runs: list[list[tuple[float, float]]] = [[]]
    for point in points:
        if point is None:
            runs.append([])
        else:
            runs[-1].append(point)
    return [run for run in runs if run]


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above `value` (an axis top a person reads at a glance)."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value * (1 - 1e-12)))


def trend_svg(jobs: Sequence[Mapping[str, Any]], key: str, *, fmt: str, color: str, what: str, family: str) -> str:
    """A line chart of one number over a family's jobs, oldest left, one dot per job (a link to its report, its
    name, date and value as the tooltip). Labelled axes: the scale's top and bottom with their unit at the left,
    the first and last job's end dates under the plot (never job names, which collide), and an axis title. Jobs
    without the number leave a gap, never a zero."""
    width, height, left, right, top, bottom = 280.0, 128.0, 48.0, 8.0, 8.0, 34.0
    values = [num(j.get(key)) for j in jobs]
    clean = [v if v is not None and math.isfinite(v) else None for v in values]
    known = [v for v in clean if v is not None]
    if not known:
        return f'<p class="muted">no {esc(what)} recorded for these jobs</p>'
    lo, hi = (0.0, 100.0) if fmt == "pct" else (0.0, nice_ceiling(max(known) * 1.05))
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(clean)

    def label(v: float) -> str:
        return pct(v, 0) if fmt == "pct" else dur(v)

    def tick(v: float) -> str:  # the axis: round numbers, short (`250 ms`, `0`)
        return pct(v, 0) if fmt == "pct" else dur_tick(v)

    points = [
        None
        if v is None
        else (left + plot_w * (i + 0.5) / n, top + plot_h - (min(max(v, lo), hi) - lo) / (hi - lo) * plot_h)
        for i, v in enumerate(clean)
    ]
    first, last = _date(_ended(jobs[0])), _date(_ended(jobs[-1]))
    latest = next((v for v in reversed(clean) if v is not None), None)
    name = (
        f"{family}: {what} over {n} job{'s' if n != 1 else ''} from {first} to {last}: "
        f"{label(min(known))} to {label(max(known))}" + (f", latest {label(latest)}" if latest is not None else "")
    )
    base = top + plot_h
    parts = [
        f'<svg class="trend" viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(name)}">',
        f'<rect x="{left}" y="{top}" width="{plot_w:.1f}" height="{plot_h:.1f}" class="plot"/>',
        f'<line x1="{left}" y1="{top + plot_h / 2:.1f}" x2="{left + plot_w:.1f}" y2="{top + plot_h / 2:.1f}" '
        'class="gridline"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" class="axis">{esc(tick(hi))}</text>',
        f'<text x="{left - 4}" y="{top + plot_h / 2 + 3:.1f}" text-anchor="end" class="axis">'
        f"{esc(tick((hi + lo) / 2))}</text>",
        f'<text x="{left - 4}" y="{base:.1f}" text-anchor="end" class="axis">{esc(tick(lo))}</text>',
    ]
    for run in _segments(points):
        if len(run) > 1:
            line = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
            parts.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="1.8"/>')
    for job, v, point in zip(jobs, clean, points, strict=True):
        if v is None or point is None:
            continue
        tip = f"{job['job']} · ended {_date(_ended(job))} · {what} {label(v)}"
        parts.append(
            f'<a href="{esc(job["job"])}/report.html"><circle cx="{point[0]:.1f}" cy="{point[1]:.1f}" r="3.5" '
            f'fill="{color}"><title>{esc(tip)}</title></circle></a>'
        )
    parts.append(f'<text x="{left}" y="{base + 13:.1f}" class="axis">{esc(first)}</text>')
    if n > 1:
        parts.append(
            f'<text x="{left + plot_w:.1f}" y="{base + 13:.1f}" text-anchor="end" class="axis">{esc(last)}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4:.1f}" text-anchor="middle" class="axis title">'
        "job end date (UTC), oldest to newest</text></svg>"
    )
    return "".join(parts)


def _change(jobs: Sequence[Mapping[str, Any]], key: str, fmt: str) -> str:
    """`latest 118 ms, +8% against the median of the 5 jobs before it`: the trend in words."""
    values = [v for j in jobs if (v := num(j.get(key))) is not None]
    if not values:
        return "—"
    latest = values[-1]
    shown = pct(latest, 1) if fmt == "pct" else dur(latest)
    before = sorted(values[-6:-1])
    if not before:
        return f"latest {shown}"
    mid = len(before) // 2
    median = before[mid] if len(before) % 2 else (before[mid - 1] + before[mid]) / 2
    if fmt == "pct":
        delta = f"{latest - median:+.1f} points"
    elif median > 0:
        delta = f"{100.0 * (latest - median) / median:+.0f}%"
    else:
        return f"latest {shown}"
    return (
        f"latest {shown}, {delta} against the median of the {len(before)} job{'s' if len(before) != 1 else ''} before"
    )


def _trend_cards(families: Sequence[tuple[str, list[Mapping[str, Any]]]]) -> str:
    cards = []
    for i, (family, jobs_newest_first) in enumerate(families[:MAX_FAMILIES_CHARTED]):
        jobs = list(reversed(jobs_newest_first[:MAX_TREND_POINTS]))
        step = trend_svg(jobs, "step_p50_us", fmt="us", color="#3b6fd8", what="step time p50", family=family)
        idle = trend_svg(jobs, "gpu_idle_pct", fmt="pct", color="#d97706", what="GPU idle", family=family)
        shown = f"newest {len(jobs)} of {len(jobs_newest_first)}" if len(jobs) < len(jobs_newest_first) else ""
        cards.append(
            f'<div class="card trendcard fam-{i}"><h3 class="family">{esc(family)} <span class="muted">'
            f"{len(jobs_newest_first)} job{'s' if len(jobs_newest_first) != 1 else ''}"
            f"{f' · {shown}' if shown else ''}</span></h3>"
            '<div class="trendpair">'
            f'<figure><figcaption><b>Step time p50</b> <span class="muted">'
            f"{esc(_change(jobs, 'step_p50_us', 'us'))}</span></figcaption>{step}</figure>"
            f'<figure><figcaption><b>GPU idle</b> <span class="muted">'
            f"{esc(_change(jobs, 'gpu_idle_pct', 'pct'))}</span></figcaption>{idle}</figure>"
            "</div></div>"
        )
    if not cards:
        return ""
    more = (
        f'<p class="hint">{len(families) - MAX_FAMILIES_CHARTED} more families are in the table.</p>'
        if len(families) > MAX_FAMILIES_CHARTED
        else ""
    )
    opened, folded = cards[:FAMILIES_OPEN], cards[FAMILIES_OPEN:]
    rest = (
        f'<details class="more-trends"><summary>the trends of {len(folded)} more famil'
        f'{"y" if len(folded) == 1 else "ies"}</summary><div class="grid trends">{"".join(folded)}</div></details>'
        if folded
        else ""
    )
    return (
        '<h2 id="trends">Trends per job family <span class="hint">each dot is a job: hover for its name, click '
        f'to open its report</span></h2><div class="grid trends">{"".join(opened)}</div>{rest}{more}'
    )


# ------------------------------------------------------------------------------------------ table


def _status_class(status: object) -> str:
    return f"st-{str(status).lower()}" if status in STATUSES else "st-other"


def _severity_class(row: Mapping[str, Any]) -> str:
    top = row.get("top_finding")
    severity = top.get("severity") if isinstance(top, Mapping) else None
    return f"sev-{severity}" if severity in SEVERITIES else "sev-none"


def _age_classes(row: Mapping[str, Any], now: datetime) -> str:
    ended = _ended(row)
    if ended is None:
        return ""
    return " ".join(f"age-{days}" for days in AGES if ended >= now - timedelta(days=days))


def _finding_cell(row: Mapping[str, Any]) -> str:
    top = row.get("top_finding")
    if not isinstance(top, Mapping):
        return '<span class="muted">no traces</span>' if row.get("no_traces") else '<span class="muted">none</span>'
    severity = str(top.get("severity") or "")
    badge = severity if severity in SEVERITIES else "muted"
    rule = str(top.get("rule_id") or "")
    more = int(row.get("findings") or 0) - 1
    return (
        f'<span class="badge {badge}">{esc(severity or "?")}</span> <b>{esc(rule_title(rule))}</b>: '
        f"{prose(top.get('message'))}" + (f' <span class="muted">(+{more} more)</span>' if more > 0 else "")
    )


def _row(row: Mapping[str, Any], family_ids: Mapping[str, int], now: datetime) -> str:
    job = esc(row["job"])
    family = row.get("family")
    fam_cls = f" fam-{family_ids[family]}" if isinstance(family, str) and family in family_ids else ""
    classes = f"job {_status_class(row.get('status'))} {_severity_class(row)} {_age_classes(row, now)}{fam_cls}"
    ended = str(row.get("ended_at") or "")
    day, _, clock = ended.replace("Z", "").partition("T")
    partial = "" if row.get("complete") or row.get("no_traces") else ' <span class="badge warning">partial</span>'
    cells = [
        ("Job", "jobcell", f'<a href="{job}/report.html">{job}</a>{partial}<div class="sub">'
         f'{esc(family) if isinstance(family, str) else "no family"} · '
         f'<a href="{job}/summary.json">summary.json</a></div>'),
        ("Status", "", esc(row.get("status") or "—")),
        ("Ended (UTC)", "n", f"<span class=d>{esc(day)}</span><div class=sub>{esc(clock[:5])}</div>"),
        ("Duration", "n", esc(duration_text(row.get("duration_s")))),
        ("Step time p50", "n", esc(dur(row.get("step_p50_us")))),
        ("GPU idle", "n", esc(pct(row.get("gpu_idle_pct")))),
        ("Cost", "n", esc(cost_text(row.get("cost_usd")))),
        ("Top finding", "topfinding", _finding_cell(row)),
    ]  # fmt: skip
    tds = "".join(f"<td{f' class={cls}' if cls else ''}>{content}</td>" for _, cls, content in cells)
    return f'<tr class="{classes.strip()}">{tds}</tr>'


_HEAD = (
    "<thead><tr><th>Job</th><th>Status</th><th class=n>Ended (UTC)</th><th class=n>Duration</th>"
    "<th class=n>Step time p50</th><th class=n>GPU idle</th><th class=n>Cost</th><th>Top finding</th></tr></thead>"
)


def _pager(pages: int, current: int) -> str:
    if pages <= 1:
        return ""
    links = "".join(
        f'<a href="#page-{p}"{" aria-current=page" if p == current else ""}>{p}</a>' for p in range(1, pages + 1)
    )
    return f'<nav class="pager" aria-label="Pages of jobs">Page {links}</nav>'


def _table(rows: Sequence[Mapping[str, Any]], family_ids: Mapping[str, int], now: datetime) -> str:
    if not rows:
        return '<div class="card"><p class="muted">No reports yet.</p></div>'
    pages = math.ceil(len(rows) / PAGE_ROWS)
    sections = []
    for p in range(1, pages + 1):
        chunk = rows[(p - 1) * PAGE_ROWS : p * PAGE_ROWS]
        first, last = (p - 1) * PAGE_ROWS + 1, (p - 1) * PAGE_ROWS + len(chunk)
        sections.append(
            f'<section class="page" id="page-{p}" aria-label="jobs {first} to {last}">{_pager(pages, p)}'
            f'<table class="jobs">{_HEAD}<tbody>{"".join(_row(r, family_ids, now) for r in chunk)}</tbody></table>'
            f"{_pager(pages, p)}</section>"
        )
    return (
        f'<div class="card jobs">{"".join(sections)}<p class="matches" data-total="{len(rows)}">'
        f"of {len(rows)} jobs</p></div>"
    )


# ------------------------------------------------------------------------------------------ filters


def _radio_group(name: str, legend: str, options: Sequence[tuple[str, str]]) -> str:
    """A row of radio buttons, `All` first (checked). `options`: (id, label); ids are ours, labels escaped."""
    items = [f'<input type="radio" name="{name}" id="{name}-all" checked><label for="{name}-all">All</label>']
    items += [
        f'<input type="radio" name="{name}" id="{oid}" class="f"><label for="{oid}">{esc(lab)}</label>'
        for oid, lab in options
    ]
    return f"<fieldset><legend>{esc(legend)}</legend>{''.join(items)}</fieldset>"


def _filters(families: Sequence[str], rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[str, str]:
    """(the filter controls, the CSS that applies them). A filter hides the rows (and trend cards) that do not
    match; any filter shows every page."""
    present = {str(r.get("status")) for r in rows}
    statuses = [s for s in STATUSES if s in present] + (["other"] if present - set(STATUSES) else [])
    groups = []
    css = []
    if len(families) > 1:
        groups.append(
            _radio_group("fam", "Family", [(f"fam-{i}", f) for i, f in enumerate(families[:MAX_FAMILY_FILTERS])])
        )
        css += [
            f"body:has(#fam-{i}:checked) tr.job:not(.fam-{i}), body:has(#fam-{i}:checked) .trendcard:not(.fam-{i})"
            for i in range(min(len(families), MAX_FAMILY_FILTERS))
        ]
    if len(statuses) > 1:
        groups.append(_radio_group("st", "Status", [(f"st-{s.lower()}", s) for s in statuses]))
        css += [f"body:has(#st-{s.lower()}:checked) tr.job:not(.st-{s.lower()})" for s in statuses]
    groups.append(_radio_group("sev", "Top finding", [(f"sev-{s}", s) for s in SEVERITIES] + [("sev-none", "none")]))
    css += [f"body:has(#sev-{s}:checked) tr.job:not(.sev-{s})" for s in (*SEVERITIES, "none")]
    groups.append(_radio_group("age", "Ended", [(f"age-{d}", f"in the {d} days to {_date(now)}") for d in AGES]))
    css += [f"body:has(#age-{d}:checked) tr.job:not(.age-{d})" for d in AGES]
    rules = ",\n".join(css) + " { display: none; }\n" if css else ""
    return f'<div class="filters card" role="group" aria-label="Filter the jobs">{"".join(groups)}</div>', rules


INDEX_CSS = """
.filters { display: flex; flex-wrap: wrap; gap: 8px 22px; padding: 10px 14px; margin-bottom: 12px; }
.filters fieldset { border: 0; margin: 0; padding: 0; display: flex; flex-wrap: wrap; align-items: center; gap: 4px; }
.filters legend { float: left; font-size: 12px; font-weight: 650; color: var(--muted); margin-right: 6px;
  text-transform: uppercase; letter-spacing: 0.05em; }
.filters input { position: absolute; opacity: 0; width: 1px; height: 1px; }
.filters label { font-size: 13px; padding: 2px 10px; border-radius: 999px; border: 1px solid var(--line);
  background: var(--card); cursor: pointer; }
.filters input:checked + label { background: var(--accent); border-color: var(--accent); color: var(--card); }
.filters input:focus-visible + label { outline: 2px solid var(--accent); outline-offset: 2px; }
section.page { display: none; }
section.page:target, .jobs:not(:has(section.page:target)) section.page:first-child { display: block; }
body:has(.filters input.f:checked) section.page { display: block; }
body:has(.filters input.f:checked) nav.pager { display: none; }
nav.pager { display: flex; flex-wrap: wrap; gap: 4px; align-items: center; margin: 8px 0; font-size: 13px;
  color: var(--muted); }
nav.pager a { padding: 1px 8px; border-radius: 6px; border: 1px solid var(--line); text-decoration: none; }
nav.pager a[aria-current] { background: var(--accent); color: var(--card); border-color: var(--accent); }
.card.jobs { counter-reset: shown; }
tr.job { counter-increment: shown; }
p.matches::before { content: counter(shown) " shown "; font-weight: 650; color: var(--fg); }
p.matches { color: var(--muted); font-size: 13px; margin: 8px 0 0; }
table.jobs td { vertical-align: top; }
table.jobs .sub { color: var(--muted); font-size: 12px; }
table.jobs .d, table.jobs td:nth-child(3) .sub { white-space: nowrap; }
table.jobs td.jobcell { min-width: 180px; overflow-wrap: anywhere; }
table.jobs td.topfinding { min-width: 240px; max-width: 560px; }
.grid.trends { grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr)); }
details.more-trends { margin-top: 10px; }
details.more-trends .grid { margin-top: 10px; }
@media (max-width: 640px) {
  table.jobs thead { display: none; }
  table.jobs, table.jobs tbody { display: block; width: 100%; }
  table.jobs tr.job { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 2px 8px;
    border-bottom: 2px solid var(--line); padding: 8px 0; }
  table.jobs td { display: block; border: 0; padding: 0; text-align: left; white-space: normal; }
  table.jobs td::before { display: block; font-size: 10px; font-weight: 650;
    color: var(--muted); text-transform: uppercase; letter-spacing: 0.04em; }
  table.jobs td:nth-child(2)::before { content: "Status"; }
  table.jobs td:nth-child(3)::before { content: "Ended (UTC)"; }
  table.jobs td:nth-child(4)::before { content: "Duration"; }
  table.jobs td:nth-child(5)::before { content: "Step time p50"; }
  table.jobs td:nth-child(6)::before { content: "GPU idle"; }
  table.jobs td:nth-child(7)::before { content: "Cost"; }
  table.jobs td:nth-child(8)::before { content: "Top finding"; }
  table.jobs td .sub { display: inline; margin-left: 4px; }
  table.jobs td.jobcell, table.jobs td.topfinding { grid-column: 1 / -1; min-width: 0; }
  table.jobs td.jobcell { font-size: 15px; }
  table.jobs td.jobcell::before { content: none; }
  table.jobs td.jobcell .sub { display: block; margin-left: 0; }
}
.trendcard h3.family { text-transform: none; letter-spacing: 0; font-size: 15px; color: var(--fg); }
.trendpair { display: grid; gap: 12px 18px; grid-template-columns: repeat(auto-fit, minmax(min(250px, 100%), 1fr)); }
.trendpair figure { margin: 0; min-width: 0; }
.trendpair figcaption { font-size: 13px; margin-bottom: 2px; }
svg.trend { display: block; width: 100%; max-width: 360px; height: auto; }
svg.trend text.axis { font-size: 10px; fill: var(--muted); }
svg.trend text.title { font-size: 9.5px; }
svg.trend .gridline { stroke: var(--gridline); stroke-width: 1; }
svg.trend a circle:hover { r: 5; }
"""


def render_page(user: str, rows: Sequence[Mapping[str, Any]], *, generated_at: datetime) -> str:
    """The whole index page (self-contained: inline CSS and SVG, no script, the report's CSP). Links are
    relative (reports/<user>/<job>/report.html beside it), so they work in a synced copy and through
    `profstack reports index`."""
    layout.user_reports_prefix(user)
    now = generated_at.astimezone(UTC)
    families = _families(rows)
    family_ids = {name: i for i, (name, _) in enumerate(families[:MAX_FAMILY_FILTERS])}
    controls, filter_css = _filters([f for f, _ in families], rows, now)
    newest = _date(_ended(rows[0])) if rows else "—"
    trends = _trend_cards(families)
    nav = (
        '<nav class="toc" aria-label="Sections of this page">'
        + ('<a href="#trends">Trends</a>' if trends else "")
        + '<a href="#jobs">Jobs</a></nav>'
    )
    body = (
        f'<header class="top"><h1>ProfStack reports: {esc(user)}</h1><div class="meta">'
        f"<div><b>Jobs</b>{len(rows)}</div><div><b>Families</b>{len(families)}</div>"
        f"<div><b>Newest job ended</b>{esc(newest)}</div>"
        f"<div><b>Page updated</b>{esc(now.strftime('%Y-%m-%d %H:%M'))} UTC</div></div></header>"
        f"{nav}{trends}"
        f'<h2 id="jobs">Jobs, newest first <span class="hint">{PAGE_ROWS} a page; a filter searches them all</span>'
        f"</h2>{controls if rows else ''}{_table(rows, family_ids, now)}"
        "<footer>Generated by ProfStack after each report · open it with every link working: "
        "<code>profstack reports index</code>; one job: <code>profstack reports open JOB</code>; compare two: "
        "<code>profstack reports diff A B</code></footer>"
    )
    return page(f"ProfStack reports: {user}", body, extra_css=INDEX_CSS + filter_css)
