"""The report's inline stylesheet: system fonts, cards, one palette, print rules."""

from __future__ import annotations

# One palette for every chart, so a colour means the same thing everywhere.
COLORS = {
    "compute": "#3b6fd8",
    "non_compute": "#8b5cf6",
    "idle": "#cbd2dc",
    "host_wait": "#f59e0b",
    "kernel_wait": "#ef4444",
    "other": "#94a3b8",
    "kernel": "#3b6fd8",
    "memcpy": "#0ea5a4",
    "memset": "#22c55e",
    "sync": "#f97316",
    "COMPUTATION": "#3b6fd8",
    "COMMUNICATION": "#d946ef",
    "MEMORY": "#0ea5a4",
    # HTA-style overlap classes in the kernel type mix
    "COMPUTATION overlapping COMMUNICATION": "#8b5cf6",
    "COMPUTATION overlapping MEMORY": "#38bdf8",
    "COMMUNICATION overlapping MEMORY": "#f472b6",
    "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": "#a78bfa",
    "fp32": "#64748b",
    "tf32": "#0ea5e9",
    "fp16": "#22c55e",
    "bf16": "#15803d",
    "fp8": "#a855f7",
    "int8": "#ec4899",
    "bar": "#3b6fd8",
    "outlier": "#ef4444",
    "exposed_comm": "#d946ef",
    "memory_only": "#0ea5a4",
    "cpu_ops": "#64748b",
    "launches": "#f59e0b",
    "dataloader": "#22c55e",
    "reserved": "#94a3b8",
    "allocated": "#3b6fd8",
}

CSS = """
:root {
  --fg: #1c2433; --muted: #5b6678; --faint: #8a94a6; --line: #e3e7ee; --bg: #f4f6fa; --card: #fff;
  --accent: #3b6fd8; --crit: #c62828; --crit-bg: #fdecec; --warn: #a15c00; --warn-bg: #fff4e0;
  --info: #1d5fb4; --info-bg: #e8f1fd; --ok: #1e7d4d; --ok-bg: #e6f5ec;
  --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans",
    "Liberation Sans", sans-serif;
}
.wrap { max-width: 1280px; margin: 0 auto; padding: 24px 20px 48px; }
header.top {
  background: linear-gradient(120deg, #1c2b4a, #27417a); color: #fff; border-radius: 12px;
  padding: 22px 26px; margin-bottom: 20px;
}
header.top h1 { margin: 0 0 4px; font-size: 22px; font-weight: 650; letter-spacing: -0.01em; }
header.top .sub { color: #c8d3ea; font-size: 13px; word-break: break-all; }
header.top .meta { display: flex; flex-wrap: wrap; gap: 8px 22px; margin-top: 14px; font-size: 13px; }
header.top .meta b { display: block; font-size: 11px; font-weight: 600; color: #9fb0d4;
  text-transform: uppercase; letter-spacing: 0.06em; }
h2 { font-size: 17px; margin: 30px 0 12px; font-weight: 650; letter-spacing: -0.01em; }
h2 .hint { font-weight: 400; color: var(--muted); font-size: 13px; margin-left: 6px; }
h3 { font-size: 13px; margin: 0 0 10px; font-weight: 650; color: var(--muted);
  text-transform: uppercase; letter-spacing: 0.05em; }
.grid { display: grid; gap: 14px; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); }
.grid.wide { grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); grid-auto-flow: row dense; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px;
  min-width: 0; break-inside: avoid; }
.card.full { grid-column: 1 / -1; }
.kpis { display: grid; gap: 12px; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); }
.kpi { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 16px; }
.kpi .v { font-size: 24px; font-weight: 650; letter-spacing: -0.02em; font-variant-numeric: tabular-nums; }
.kpi .l { color: var(--muted); font-size: 12px; }
.kpi.bad .v { color: var(--crit); } .kpi.warn .v { color: var(--warn); } .kpi.good .v { color: var(--ok); }
.badge { display: inline-block; border-radius: 999px; padding: 1px 9px; font-size: 11px; font-weight: 650;
  text-transform: uppercase; letter-spacing: 0.05em; vertical-align: middle; white-space: nowrap; }
.badge.critical { background: var(--crit-bg); color: var(--crit); }
.badge.warning { background: var(--warn-bg); color: var(--warn); }
.badge.info { background: var(--info-bg); color: var(--info); }
.badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.muted { background: #eef1f5; color: var(--muted); }
header.top .badge.ok { background: #d5f0e0; } header.top .badge.warning { background: #ffe8bf; }
.finding { border-left: 4px solid var(--info); }
.finding.critical { border-left-color: var(--crit); } .finding.warning { border-left-color: #e59400; }
.finding .head { display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.finding .rule { font-weight: 650; }
.finding .ranks { color: var(--faint); font-size: 12px; }
.finding p { margin: 6px 0; }
.finding .rec { background: #f6f8fb; border-radius: 6px; padding: 8px 10px; margin-top: 8px; }
.finding .rec::before { content: "Recommendation  "; font-weight: 650; color: var(--muted); font-size: 12px; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 8px; }
.chip { background: #f1f3f7; border-radius: 6px; padding: 1px 8px; font-size: 12px; color: var(--muted);
  font-variant-numeric: tabular-nums; }
.chip b { color: var(--fg); font-weight: 600; }
.empty { color: var(--muted); font-style: italic; }
.notice { background: var(--info-bg); color: #12406f; border-radius: 8px; padding: 10px 14px; margin: 10px 0; }
.notice.warn { background: var(--warn-bg); color: #6b3d00; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; table-layout: auto; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 11px; text-transform: uppercase; letter-spacing: 0.05em; color: var(--muted);
  font-weight: 650; white-space: nowrap; }
td.n, th.n { text-align: right; white-space: nowrap; }
tr.straggler td { background: #fff4e0; }
tr.straggler td:first-child { box-shadow: inset 3px 0 0 #e59400; }
td.name { max-width: 0; width: 60%; }
td.name .k { display: block; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  font-family: var(--mono); font-size: 12px; }
td.name .bar { height: 4px; border-radius: 2px; background: var(--accent); margin-top: 4px; opacity: 0.75; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-top: 8px; font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 3px; margin-right: 5px;
  vertical-align: -1px; }
.legend b { color: var(--fg); font-weight: 600; font-variant-numeric: tabular-nums; }
.split { display: flex; gap: 18px; align-items: center; flex-wrap: wrap; }
.split > .grow { flex: 1 1 200px; min-width: 0; }
.donut-center { font-size: 24px; font-weight: 700; fill: var(--fg); }
.donut-caption { font-size: 10px; fill: var(--muted); text-transform: uppercase; letter-spacing: 0.06em; }
.stat-row { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 4px 0 10px; }
.stat-row div { font-size: 12px; color: var(--muted); }
.stat-row div b { display: block; color: var(--fg); font-size: 16px; font-weight: 650;
  font-variant-numeric: tabular-nums; }
.colchart { position: relative; }
.colplot { position: relative; }
.colplot svg { display: block; }
.colchart .axis { stroke: #c7ced9; stroke-width: 1; vector-effect: non-scaling-stroke; }
.ymax { position: absolute; left: 4px; top: -2px; font-size: 11px; color: var(--faint);
  background: rgba(255,255,255,0.85); padding: 0 3px; }
.xlabels { position: relative; height: 18px; font-size: 11px; color: var(--faint); }
.xlabels span { position: absolute; transform: translateX(-50%); white-space: nowrap; }
.threshold { position: absolute; left: 0; right: 0; border-top: 1.5px dashed var(--crit); }
.threshold span { position: absolute; right: 0; top: -17px; font-size: 11px; color: var(--crit);
  background: rgba(255,255,255,0.85); padding: 0 4px; }
.timechart .grid { stroke: #e3e7ee; stroke-width: 1; vector-effect: non-scaling-stroke; }
.heatrows { display: grid; grid-template-columns: minmax(60px, max-content) 1fr; gap: 3px 10px;
  align-items: center; font-size: 12px; }
.heatrows svg { display: block; border-radius: 3px; }
.strip { font-size: 12px; }
.strip-row { display: flex; align-items: center; gap: 10px; height: 24px; }
.strip-label { width: 70px; flex: none; color: var(--muted); font-variant-numeric: tabular-nums; }
.strip-track { position: relative; flex: 1; height: 24px; border-bottom: 1px solid var(--line); }
.strip-track i { position: absolute; top: 7px; width: 10px; height: 10px; border-radius: 50%;
  transform: translateX(-50%); }
.strip-track em { position: absolute; top: 4px; font-style: normal;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
.strip-axis { flex: 1; display: flex; justify-content: space-between; color: var(--faint); font-size: 11px; }
.minihist { display: grid; gap: 10px 16px; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); }
.minihist .k { font-family: var(--mono); font-size: 12px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; display: block; }
.howto { background: #f6f8fb; border-radius: 6px; padding: 8px 10px; margin: 8px 0 0; font-size: 13px; }
code { font-family: var(--mono); font-size: 12px; }
section.rank { margin-top: 34px; padding-top: 6px; border-top: 2px solid var(--line); }
section.rank > h2 { margin-top: 14px; }
.src { font-family: var(--mono); font-size: 12px; color: var(--muted); word-break: break-all; }
.muted { color: var(--muted); }
footer { margin-top: 40px; color: var(--faint); font-size: 12px; text-align: center; }
details summary { cursor: pointer; color: var(--accent); font-size: 13px; margin-top: 6px; }
@media (max-width: 640px) {
  .wrap { padding: 12px 10px 32px; }
  .grid.wide { grid-template-columns: 1fr; }
  td.name { width: auto; min-width: 180px; max-width: 260px; }
  table { display: block; overflow-x: auto; }
  .kpis { grid-template-columns: repeat(2, 1fr); }
}
@media print {
  body { background: #fff; font-size: 11px; }
  .wrap { max-width: none; padding: 0; }
  header.top { background: #fff; color: var(--fg); border: 1px solid var(--line); }
  header.top .sub, header.top .meta b { color: var(--muted); }
  .card, .kpi, tr { break-inside: avoid; }
  section.rank { break-before: page; }
  details { display: block; }
  details > summary { display: none; }
}
"""
