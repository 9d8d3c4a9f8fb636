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
  color-scheme: light dark;
  --fg: #1c2433; --muted: #5b6678; --faint: #5f6b7d; --line: #e3e7ee; --bg: #f4f6fa; --card: #fff;
  --soft: #f1f3f7; --track: #eef1f5; --plot: #f7f9fc; --gridline: #e3e7ee; --axis: #c7ced9;
  --accent: #2f5fc4; --crit: #c62828; --crit-bg: #fdecec; --warn: #a15c00; --warn-bg: #fff4e0;
  --info: #1d5fb4; --info-bg: #e8f1fd; --ok: #17663f; --ok-bg: #e6f5ec; --warn-edge: #e59400;
  --notice-fg: #12406f; --notice-warn-fg: #6b3d00; --straggler: #fff4e0; --label-bg: rgba(255,255,255,0.9);
  --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
}
@media (prefers-color-scheme: dark) {
  :root {
    --fg: #e6e9ef; --muted: #a9b3c4; --faint: #9aa4b5; --line: #2c3444; --bg: #0f141c; --card: #171d27;
    --soft: #222a36; --track: #2a3240; --plot: #1b222d; --gridline: #2c3444; --axis: #465063;
    --accent: #8ab4ff; --crit: #ff8a80; --crit-bg: #3a1d1d; --warn: #f5b041; --warn-bg: #3a2a10;
    --info: #8ab4ff; --info-bg: #1a2a44; --ok: #6fd39b; --ok-bg: #15301f; --warn-edge: #c98a1a;
    --notice-fg: #cfe0ff; --notice-warn-fg: #ffe2b0; --straggler: #33270f; --label-bg: rgba(23,29,39,0.9);
  }
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; scroll-padding-top: 52px; }
body {
  margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans",
    "Liberation Sans", sans-serif;
}
a { color: var(--accent); }
.wrap { max-width: 1280px; margin: 0 auto; padding: 20px 20px 48px; }
header.top {
  background: linear-gradient(120deg, #1c2b4a, #27417a); color: #fff; border-radius: 12px;
  padding: 18px 22px; margin-bottom: 12px;
}
header.top h1 { margin: 0 0 4px; font-size: 21px; font-weight: 650; letter-spacing: -0.01em;
  overflow-wrap: anywhere; }
header.top .sub { color: #c8d3ea; font-size: 13px; overflow-wrap: anywhere; }
header.top .meta { display: flex; flex-wrap: wrap; gap: 6px 22px; margin-top: 10px; font-size: 13px; }
header.top .meta b { display: block; font-size: 11px; font-weight: 600; color: #b4c3e4;
  text-transform: uppercase; letter-spacing: 0.06em; }
header.top a { color: #dbe6ff; }
header.top details { margin-top: 8px; }
header.top details summary { color: #dbe6ff; }
header.top .src { color: #dbe6ff; }
header.top ul.src { margin: 6px 0 0; padding-left: 18px; }
nav.toc { position: sticky; top: 0; z-index: 5; display: flex; gap: 4px; overflow-x: auto; white-space: nowrap;
  background: var(--bg); padding: 6px 0; margin: 0 0 4px; border-bottom: 1px solid var(--line);
  scrollbar-width: thin; }
nav.toc a { color: var(--fg); text-decoration: none; font-size: 13px; padding: 4px 10px; border-radius: 999px;
  background: var(--card); border: 1px solid var(--line); }
nav.toc a:hover, nav.toc a:focus-visible { border-color: var(--accent); color: var(--accent); }
nav.toc a.up { background: var(--info-bg); color: var(--info); border-color: transparent; font-weight: 600; }
[id] { scroll-margin-top: 52px; }
h2 { font-size: 17px; margin: 26px 0 10px; font-weight: 650; letter-spacing: -0.01em; }
h2 .hint { font-weight: 400; color: var(--muted); font-size: 13px; margin-left: 6px; }
h3 { font-size: 13px; margin: 0 0 10px; font-weight: 650; color: var(--muted);
  text-transform: uppercase; letter-spacing: 0.05em; }
.hint { color: var(--muted); font-size: 12px; }
.grid { display: grid; gap: 14px; grid-template-columns: repeat(auto-fit, minmax(min(300px, 100%), 1fr)); }
.grid.wide { grid-template-columns: repeat(auto-fit, minmax(min(520px, 100%), 1fr)); grid-auto-flow: row dense; }
.grid.findings { grid-template-columns: repeat(auto-fit, minmax(min(460px, 100%), 1fr)); align-items: start; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px;
  min-width: 0; break-inside: avoid; overflow-wrap: break-word; }
.card.full { grid-column: 1 / -1; }
.tw { overflow-x: auto; max-width: 100%; }
.kpis { display: grid; gap: 10px; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); }
.kpi { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 10px 14px; min-width: 0; }
.kpi .v { font-size: 22px; font-weight: 650; letter-spacing: -0.02em; font-variant-numeric: tabular-nums; }
.kpi .l { color: var(--fg); font-size: 13px; font-weight: 600; }
.kpi .s { color: var(--muted); font-size: 12px; }
.kpi.bad .v { color: var(--crit); } .kpi.warn .v { color: var(--warn); } .kpi.good .v { color: var(--ok); }
.badge { display: inline-block; border-radius: 999px; padding: 1px 9px; font-size: 11px; font-weight: 650;
  text-transform: uppercase; letter-spacing: 0.05em; vertical-align: middle; white-space: nowrap; }
.badge.critical { background: var(--crit-bg); color: var(--crit); }
.badge.warning { background: var(--warn-bg); color: var(--warn); }
.badge.info { background: var(--info-bg); color: var(--info); }
.badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.muted { background: var(--soft); color: var(--muted); }
header.top .badge.ok { background: #d5f0e0; color: #17663f; }
header.top .badge.warning { background: #ffe8bf; color: #7a4500; }
header.top .badge.muted { background: #e3e8f2; color: #3b4658; }
.finding { border-left: 4px solid var(--info); }
.finding.critical { border-left-color: var(--crit); } .finding.warning { border-left-color: var(--warn-edge); }
.finding .head { display: flex; gap: 4px 10px; align-items: baseline; flex-wrap: wrap; }
.finding h3.rule { font-size: 15px; margin: 0; color: var(--fg); text-transform: none; letter-spacing: 0; }
.finding .ranks { color: var(--muted); font-size: 12px; }
.finding .rid { color: var(--muted); font-size: 11px; margin-left: auto; }
.finding p { margin: 6px 0; }
.finding ul.seen { margin: 8px 0 0; padding: 0; list-style: none; }
.finding ul.seen li { padding: 4px 0; border-top: 1px solid var(--line); }
.finding ul.seen li:first-child { border-top: 0; }
.finding .where { display: inline-block; min-width: 56px; font-weight: 600; font-size: 12px; color: var(--muted);
  font-variant-numeric: tabular-nums; }
.finding ul.seen details summary { font-size: 12px; display: inline; margin-left: 4px; }
.rec { background: var(--soft); border-radius: 6px; padding: 8px 10px; margin-top: 8px; }
.rec .rec-h { font-weight: 650; color: var(--fg); font-size: 12px; margin-right: 4px; }
.rec details p { margin: 6px 0 0; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; }
.chip { background: var(--soft); border-radius: 6px; padding: 1px 8px; font-size: 12px; color: var(--muted);
  font-variant-numeric: tabular-nums; }
.chip b { color: var(--fg); font-weight: 600; }
.empty { color: var(--muted); font-style: italic; }
.notice { background: var(--info-bg); color: var(--notice-fg); border-radius: 8px; padding: 10px 14px; margin: 10px 0; }
.notice.warn { background: var(--warn-bg); color: var(--notice-warn-fg); }
.notice ul.notes { margin: 6px 0 0 0; padding-left: 18px; }
.notice details summary { color: inherit; text-decoration: underline; }
ol.causes { list-style: none; margin: 0; padding: 0; }
li.cause { padding: 10px 0; border-top: 1px solid var(--line); }
li.cause:first-child { border-top: 0; padding-top: 0; }
.cause-head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 12px; }
.cause-head .n { display: inline-grid; place-items: center; width: 22px; height: 22px; border-radius: 50%;
  background: var(--warn-bg); color: var(--warn); font-weight: 700; font-size: 12px; }
.cause-head .what { font-weight: 650; font-size: 15px; }
.cause-head .share { font-variant-numeric: tabular-nums; }
.cause-head .cost { font-weight: 650; font-variant-numeric: tabular-nums; }
.meter { display: block; height: 6px; border-radius: 3px; background: var(--track); margin: 6px 0 4px;
  max-width: 520px; }
.meter i { display: block; height: 6px; border-radius: 3px; background: var(--warn-edge); }
li.cause p { margin: 4px 0 0; }
li.cause .change b { color: var(--fg); }
.silent { color: var(--fg); }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; table-layout: auto; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 11px; text-transform: uppercase; letter-spacing: 0.05em; color: var(--muted); font-weight: 650; }
td.n, th.n { text-align: right; }
td.n { white-space: nowrap; }
td.why { min-width: 220px; }
tr.straggler td { background: var(--straggler); }
tr.straggler td:first-child { box-shadow: inset 3px 0 0 var(--warn-edge); }
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
svg .track { fill: var(--track); }
svg .track-ring { stroke: var(--track); }
svg .plot { fill: var(--plot); }
.donut-center { font-size: 24px; font-weight: 700; fill: var(--fg); }
.donut-caption { font-size: 11px; fill: var(--muted); text-transform: uppercase; letter-spacing: 0.06em; }
.stat-row { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 4px 0 10px; }
.stat-row div { font-size: 12px; color: var(--muted); }
.stat-row div b { display: block; color: var(--fg); font-size: 16px; font-weight: 650;
  font-variant-numeric: tabular-nums; }
.colchart { position: relative; }
.colplot { position: relative; }
.colplot svg { display: block; }
.colchart .axis { stroke: var(--axis); stroke-width: 1; vector-effect: non-scaling-stroke; }
.ymax { position: absolute; left: 4px; top: -2px; font-size: 11px; color: var(--faint);
  background: var(--label-bg); padding: 0 3px; }
.xlabels { position: relative; height: 18px; font-size: 11px; color: var(--faint); }
.xlabels span { position: absolute; transform: translateX(-50%); white-space: nowrap; }
.xtitle { font-size: 11px; color: var(--faint); text-align: center; margin-top: 2px; }
.threshold { position: absolute; left: 0; right: 0; border-top: 1.5px dashed var(--crit); }
.threshold span { position: absolute; right: 0; top: -17px; font-size: 11px; color: var(--crit);
  background: var(--label-bg); padding: 0 4px; }
.timechart .grid { stroke: var(--gridline); stroke-width: 1; vector-effect: non-scaling-stroke; }
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
.minihist { display: grid; gap: 10px 16px; grid-template-columns: repeat(auto-fill, minmax(min(230px, 100%), 1fr)); }
.minihist .k { font-family: var(--mono); font-size: 12px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; display: block; }
.howto { background: var(--soft); border-radius: 6px; padding: 8px 10px; margin: 8px 0 0; font-size: 13px; }
code { font-family: var(--mono); font-size: 12px; overflow-wrap: anywhere; }
section.rank { margin-top: 34px; padding-top: 6px; border-top: 2px solid var(--line); }
section.rank > h2 { margin-top: 14px; }
.src { font-family: var(--mono); font-size: 12px; color: var(--muted); word-break: break-all; }
.muted { color: var(--muted); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; text-align: center; }
details summary { cursor: pointer; color: var(--accent); font-size: 13px; margin-top: 6px; }
@media (max-width: 640px) {
  .wrap { padding: 10px 10px 32px; }
  header.top { padding: 14px 16px; }
  header.top h1 { font-size: 18px; }
  .grid.wide { grid-template-columns: 1fr; }
  td.name { width: auto; min-width: 180px; max-width: 260px; }
  .kpis { grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 8px; }
  .kpi { padding: 8px 10px; }
  .kpi .v { font-size: 19px; }
  .finding .rid { margin-left: 0; }
}
@media print {
  body { background: #fff; color: #000; font-size: 11px; }
  .wrap { max-width: none; padding: 0; }
  nav.toc { display: none; }
  header.top { background: #fff; color: var(--fg); border: 1px solid var(--line); }
  header.top .sub, header.top .meta b { color: var(--muted); }
  .card, .kpi, tr { break-inside: avoid; }
  section.rank { break-before: page; }
  details { display: block; }
  details > summary { display: none; }
}
"""
