"""Measure an HTML page the way a reader meets it, in headless Chromium: layout facts, not pixels by eye.

    python -m scripts.page_audit PAGE.html [--width 400 800 1400] [--scheme light dark] [--shots DIR]

For each width and colour scheme it loads the page (no network: the pages allow none) and reports, measured in
the page itself:

* the page height, and what the first screen holds (the headings and the KPI block above the fold);
* horizontal overflow: the document wider than the window, and every card (`.card`, `.kpi`) whose content spills
  out of its box (a table wider than its card, a long word);
* contrast: every element with its own text, its computed colour against the background it is drawn on
  (ancestors' colours composited, gradients taken at their worst stop), by WCAG 2.x's formula; and SVG text by
  its fill;
* charts: every ``<svg>`` a reader is shown (not ``aria-hidden``) with an accessible name (``role="img"`` and an
  ``aria-label``, ``aria-labelledby`` or a ``<title>`` child).

The tests (tests/unit/report/test_report_layout.py) assert on these numbers; this CLI prints them, so a change
can be measured before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.screenshot_report import CHROMIUM_ARGS, find_chromium

#: WCAG 2.x AA: 4.5:1 for text, 3:1 for large text (24 px, or 18.66 px bold)
AA_TEXT = 4.5
AA_LARGE = 3.0

AUDIT_JS = r"""
(viewportHeight) => {
  const styles = new Map();
  const style = (e) => { let cs = styles.get(e); if (!cs) { cs = getComputedStyle(e); styles.set(e, cs); } return cs; };
  const parse = (c) => {
    const m = c && c.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (fg, bg) => [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3])).concat([1]);
  const lum = (c) => {
    const ch = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2];
  };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const stopsOf = (img) => (img.match(/rgba?\([^)]+\)/g) || []).map(parse);
  // the backgrounds an element's text may be drawn on: ancestors' colours composited (several when a gradient
  // is in the way: each of its stops)
  const bgCache = new Map();
  const backgrounds = (el) => {
    if (!el || el.nodeType !== 1) return [[255, 255, 255, 1]];
    if (bgCache.has(el)) return bgCache.get(el);
    const cs = style(el);
    const stops = cs.backgroundImage && cs.backgroundImage !== 'none' ? stopsOf(cs.backgroundImage) : [];
    const c = parse(cs.backgroundColor);
    let out;
    if (stops.length) {
      const opaque = stops.every(s => s[3] >= 1);
      out = opaque ? stops : backgrounds(el.parentElement).flatMap(b => stops.map(s => over(s, b)));
    } else if (c && c[3] >= 1) {
      out = [c];
    } else if (c && c[3] > 0) {
      out = backgrounds(el.parentElement).map(b => over(c, b));
    } else {
      out = backgrounds(el.parentElement);
    }
    bgCache.set(el, out);
    return out;
  };
  const shown = new Map();
  const visibleChain = (e) => {  // display, visibility, opacity and closed <details> of the element and ancestors
    if (!e || e.nodeType !== 1) return true;
    if (shown.has(e)) return shown.get(e);
    const cs = style(e);
    let v = cs.display !== 'none' && cs.visibility !== 'hidden' && Number(cs.opacity) !== 0;
    const parent = e.parentElement;
    if (v && parent && parent.tagName === 'DETAILS' && !parent.open && e.tagName !== 'SUMMARY') v = false;
    v = v && visibleChain(parent);
    shown.set(e, v);
    return v;
  };
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && visibleChain(el);
  };
  const opacity = (el) => {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= Number(style(e).opacity);
    return o;
  };
  const describe = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.className && typeof el.className === 'string') s += '.' + el.className.trim().split(/\s+/).join('.');
    const t = (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 40);
    return s + (t ? ' "' + t + '"' : '');
  };

  const contrast = [];
  for (const el of document.body.querySelectorAll('*')) {
    const isSvgText = el instanceof SVGElement && (el.tagName === 'text' || el.tagName === 'tspan');
    if (el instanceof SVGElement && !isSvgText) continue;
    if (['SCRIPT', 'STYLE', 'TITLE'].includes(el.tagName)) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || !visible(el)) continue;
    const cs = style(el);
    let fg = parse(isSvgText ? cs.fill : cs.color);
    if (!fg) continue;
    fg = [fg[0], fg[1], fg[2], fg[3] * opacity(el)];
    const size = parseFloat(cs.fontSize), bold = Number(cs.fontWeight) >= 700;
    const large = size >= 24 || (size >= 18.66 && bold);
    let worst = Infinity;
    for (const bg of backgrounds(isSvgText ? el.closest('svg') : el)) worst = Math.min(worst, ratio(over(fg, bg), bg));
    contrast.push({el: describe(el), ratio: Math.round(worst * 100) / 100, large, size});
  }

  const overflow = [];
  const docOverflow = document.documentElement.scrollWidth - window.innerWidth;
  for (const card of document.querySelectorAll('.card, .kpi')) {
    if (!visible(card)) continue;
    const box = card.getBoundingClientRect();
    let spill = 0, what = '';
    for (const d of card.querySelectorAll('*')) {
      if (!visible(d)) continue;
      // content inside a scroll box of its own (a wide table's) scrolls there, it does not spill
      let clipped = false;
      for (let e = d.parentElement; e && e !== card; e = e.parentElement) {
        const ox = style(e).overflowX;
        if (ox === 'auto' || ox === 'scroll' || ox === 'hidden') { clipped = true; break; }
      }
      if (clipped) continue;
      const r = d.getBoundingClientRect();
      const out = Math.max(r.right - box.right, box.left - r.left);
      if (out > spill + 0.5) { spill = out; what = describe(d); }
    }
    if (spill > 1) overflow.push({card: describe(card), px: Math.round(spill), what});
  }

  const charts = [];
  for (const svg of document.querySelectorAll('svg')) {
    if (svg.closest('[aria-hidden="true"]') || !visible(svg)) continue;
    const title = svg.querySelector(':scope > title');
    const ids = (svg.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean);
    const labelled = ids.map(id => (document.getElementById(id) || {}).textContent || '').join(' ').trim();
    const name = (svg.getAttribute('aria-label') || labelled || (title && title.textContent) || '').trim();
    charts.push({role: svg.getAttribute('role'), name, cls: svg.getAttribute('class') || ''});
  }

  const fold = [];
  for (const el of document.querySelectorAll('h1, h2, .kpis, nav, .overview, .causes')) {
    const r = el.getBoundingClientRect();
    if (visible(el) && r.top + window.scrollY < viewportHeight) {
      const tag = el.tagName.toLowerCase() + (el.className ? '.' + el.className : '');
      const text = (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
      fold.push({tag, top: Math.round(r.top + window.scrollY), text});
    }
  }
  const kpis = document.querySelector('.kpis');
  const kpiRect = kpis ? kpis.getBoundingClientRect() : null;
  return {
    height: document.documentElement.scrollHeight,
    doc_overflow: docOverflow,
    kpis_top: kpiRect ? Math.round(kpiRect.top + window.scrollY) : null,
    kpis_bottom: kpiRect ? Math.round(kpiRect.bottom + window.scrollY) : null,
    fold, contrast, overflow, charts,
  };
}
"""


@dataclass
class Audit:
    width: int
    scheme: str
    height: int
    doc_overflow: int
    kpis_top: int | None
    kpis_bottom: int | None
    fold: list[dict[str, Any]]
    contrast: list[dict[str, Any]]
    overflow: list[dict[str, Any]]
    charts: list[dict[str, Any]]
    console_errors: list[str] = field(default_factory=list)

    @property
    def low_contrast(self) -> list[dict[str, Any]]:
        """Text under WCAG AA: 4.5:1, or 3:1 for large text."""
        return [c for c in self.contrast if c["ratio"] < (AA_LARGE if c["large"] else AA_TEXT)]

    @property
    def min_contrast(self) -> float:
        return min((c["ratio"] for c in self.contrast), default=0.0)

    @property
    def unnamed_charts(self) -> list[dict[str, Any]]:
        return [c for c in self.charts if c["role"] != "img" or not c["name"]]


@contextmanager
def browser() -> Iterator[Any]:
    """One headless Chromium (Debian's), driven by Playwright, for several pages."""
    from playwright.sync_api import sync_playwright

    path = find_chromium()
    if path is None:
        raise RuntimeError("headless Chromium not installed (apt-get install -y chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=path, args=list(CHROMIUM_ARGS))
        try:
            yield chromium
        finally:
            chromium.close()


def audit(
    chromium: Any, page_file: Path, *, width: int, scheme: str = "light", height: int = 900, shot: Path | None = None
) -> Audit:
    """Load `page_file` at `width` x `height` CSS pixels in `scheme` (light or dark) and measure it."""
    context = chromium.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_file.resolve().as_uri(), wait_until="load")
        found = page.evaluate(AUDIT_JS, height)
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
    finally:
        context.close()
    return Audit(width=width, scheme=scheme, console_errors=errors, **found)


def summary_line(a: Audit) -> str:
    named = len(a.charts) - len(a.unnamed_charts)
    fold = ", ".join(f"{f['tag']}@{f['top']}" for f in a.fold)
    return (
        f"{a.width:>5} px {a.scheme:<5} height {a.height:>6} px · KPIs at {a.kpis_top} px · document overflow "
        f"{a.doc_overflow} px · cards overflowing {len(a.overflow)} · contrast min {a.min_contrast:.2f}:1, "
        f"{len(a.low_contrast)} of {len(a.contrast)} text elements under AA · charts named {named}/{len(a.charts)}\n"
        f"      first screen: {fold}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.page_audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--width", type=int, nargs="+", default=[400, 800, 1400])
    parser.add_argument("--scheme", nargs="+", default=["light", "dark"], choices=["light", "dark"])
    parser.add_argument("--height", type=int, default=900, help="viewport height (the first screen)")
    parser.add_argument("--shots", type=Path, help="write a full-page PNG per width and scheme here")
    parser.add_argument("--json", action="store_true", help="print every measurement as JSON")
    parser.add_argument("--details", action="store_true", help="list low-contrast text, overflow and unnamed charts")
    args = parser.parse_args(argv)
    results = []
    with browser() as chromium:
        for scheme in args.scheme:
            for width in args.width:
                shot = args.shots / f"{args.page.stem}-{width}-{scheme}.png" if args.shots else None
                results.append(audit(chromium, args.page, width=width, scheme=scheme, height=args.height, shot=shot))
    if args.json:
        print(json.dumps([r.__dict__ for r in results], indent=1))
        return 0
    for r in results:
        print(summary_line(r))
        if args.details:
            seen: set[str] = set()
            for c in r.low_contrast:
                key = f"{c['el'][:30]} {c['ratio']}"
                if key not in seen:
                    seen.add(key)
                    print(f"      low contrast {c['ratio']:.2f}:1  {c['el']}")
            for o in r.overflow[:10]:
                print(f"      overflow {o['px']} px  {o['card'][:40]} <- {o['what']}")
            for c in r.unnamed_charts[:10]:
                print(f"      unnamed chart  svg.{c['cls']} role={c['role']}")
        for e in r.console_errors:
            print(f"      console error: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
